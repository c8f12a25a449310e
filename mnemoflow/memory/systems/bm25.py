"""``bm25_message`` / ``bm25_session``: lexical retrieval over messages or whole sessions.

These are the BM25-M / BM25-S baselines of MemoryBench and the sparse retrievers of LongMemEval.
Retrieved items are returned best first; the reader re-sorts them by time.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.memory.base import MemoryItem, Message, register
from mnemoflow.memory.bm25_index import BACKENDS, BM25Index
from mnemoflow.memory.message_store import MessageStoreSystem, render
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokenize import tokenize


class _BM25Base(MessageStoreSystem):
    # lang: "auto" segments Chinese text with jieba and uses English words otherwise.
    # The index is built from the stored messages at retrieval: every parameter is query-time.
    ingest_params = frozenset()
    ingest_roles = ()
    query_roles = ()
    defaults, params_schema = declare_params(
        top_k=Param(5, "integer", minimum=1),
        backend=Param("bm25s", enum=list(BACKENDS)),
        k1=Param(1.5, "number", minimum=0),
        b=Param(0.75, "number", minimum=0, maximum=1),
        lang=Param("auto", enum=["auto", "en", "zh"]),
    )

    def _units(self) -> list[tuple[str, str, list[str], str]]:
        """(id, text, source turn ids, time) of every retrievable document."""
        raise NotImplementedError

    def _build(self) -> None:
        self._docs = self._units()
        self._index = BM25Index(
            [tokenize(text, self.params["lang"]) for _, text, _, _ in self._docs],
            backend=self.params["backend"],
            k1=float(self.params["k1"]),
            b=float(self.params["b"]),
        )
        self._dirty = False

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        if self._dirty:
            self._build()
        k = int(k if k is not None else self.params["top_k"])
        indices, scores = self._index.search(tokenize(query, self.params["lang"]), k)
        items = []
        for index, score in zip(indices.tolist(), scores.tolist(), strict=True):
            unit_id, text, sources, time = self._docs[index]
            items.append(MemoryItem(unit_id, text, float(score), list(sources), time))
        return items


@register
class BM25Message(_BM25Base):
    """BM25 over single messages (one document per turn)."""

    name = "bm25_message"

    def _units(self) -> list[tuple[str, str, list[str], str]]:
        return [(m.turn_id, render(m), [m.turn_id], m.time) for m in self.messages]


@register
class BM25Session(_BM25Base):
    """BM25 over whole sessions (one document per session)."""

    name = "bm25_session"
    granularity = "session"
    defaults: dict[str, Any] = {**_BM25Base.defaults, "top_k": 2}

    def _units(self) -> list[tuple[str, str, list[str], str]]:
        sessions: dict[str, list[Message]] = {}
        for message in self.messages:
            sessions.setdefault(message.session_id, []).append(message)
        return [
            (sid, "\n".join(render(m) for m in msgs), [m.turn_id for m in msgs], msgs[0].time)
            for sid, msgs in sessions.items()
        ]
