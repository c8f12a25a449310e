"""Dense retrieval over messages or sessions [LongMemEval / LoCoMo "Emb-M" / "Emb-S"].

Embeddings come from the gateway's ``embedder`` role (the bundled all-MiniLM-L6-v2 by default, or
any /v1/embeddings endpoint), behind its content-addressed cache: LongMemEval haystacks share
sessions across questions, and each distinct text is embedded once across questions, jobs and
reruns. Search is exact inner product over L2-normalized vectors (cosine).

A message is embedded as it is shown to the reader, "speaker: content". LoCoMo's questions name
the speaker ("When did Caroline go to ..."), and the name is often only in the speaker field:
with all-MiniLM-L6-v2 on three LoCoMo conversations, recall@10 is 0.50 this way and 0.24 when
only the content is embedded.

``dense_session`` departs from embedding a whole session as one text by default: a 256-token
encoder such as MiniLM would silently truncate a typical session to its first few turns. With
``pooling: max`` (default) a session scores as its best-matching message, which keeps every turn
searchable and reuses the message embeddings; ``pooling: document`` embeds the session text as one
document (the reference setup with long-context retrievers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.memory.base import (
    MemoryItem,
    MemorySystem,
    Message,
    WritePattern,
    load_messages,
    register,
    save_messages,
)
from mnemoflow.memory.buffer import render
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokens import count_tokens
from mnemoflow.memory.vector_store import (
    StoredItem,
    VectorStore,
    embed,
    search_memory,
    store_messages,
    unseen_messages,
)


@register
class DenseMessage(MemorySystem):
    """Dense retrieval over single messages (one vector per turn)."""

    name: ClassVar[str] = "dense_message"
    ingest_params: ClassVar[frozenset[str]] = frozenset()
    ingest_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: one embedded text per new message; no writer
    write_pattern: ClassVar[WritePattern] = WritePattern(batch_param=None)
    defaults, params_schema = declare_params(top_k=Param(10, "integer", minimum=1))

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.store = VectorStore()
        self.tokens_written = 0

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        new = unseen_messages(messages, self.store)
        if new:
            self.tokens_written += await store_messages(self.store, self.llm, new)

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        k = self.params["top_k"] if k is None else k
        return await search_memory(self.store, self.llm, query, k)

    def save(self, directory: Path) -> None:
        self.store.save(directory)
        (directory / "state.json").write_text(json.dumps({"tokens_written": self.tokens_written}))

    def load(self, directory: Path) -> None:
        self.store.load(directory)
        self.tokens_written = json.loads((directory / "state.json").read_text())["tokens_written"]

    def stored_ids(self) -> set[str] | None:
        return self.store.source_ids()

    def stats(self) -> dict[str, Any]:
        return {"items": len(self.store), "tokens_written": self.tokens_written, "writer_calls": 0}


@register
class DenseSession(MemorySystem):
    """Dense retrieval over whole sessions (a session scores as its best message by default)."""

    name: ClassVar[str] = "dense_session"
    ingest_params: ClassVar[frozenset[str]] = frozenset({"pooling"})
    ingest_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: one embedded text per new message (pooling max) or per touched session (document)
    write_pattern: ClassVar[WritePattern] = WritePattern(batch_param=None)
    granularity: ClassVar[str] = "session"
    defaults: ClassVar[dict[str, Any]] = {"top_k": 5, "pooling": "max"}
    params_schema: ClassVar[dict[str, Any]] = {
        "top_k": {"type": "integer", "minimum": 1},
        "pooling": {"enum": ["max", "document"]},
    }

    @classmethod
    def write_pattern_for(cls, params: dict[str, Any]) -> WritePattern:
        if params.get("pooling", cls.defaults["pooling"]) == "document":
            return WritePattern(batch_param=None, unit="session")
        return cls.write_pattern

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.sessions: dict[str, list[Message]] = {}  # insertion order = conversation order
        self.store = VectorStore()  # rows: messages (max) or sessions (document)

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        seen = {m.turn_id for session in self.sessions.values() for m in session}
        touched: list[str] = []
        new: list[Message] = []
        for m in messages:
            if m.turn_id in seen or not m.content.strip():
                continue
            seen.add(m.turn_id)
            self.sessions.setdefault(m.session_id, []).append(m)
            new.append(m)
            if m.session_id not in touched:
                touched.append(m.session_id)
        if not new:
            return
        if self.params["pooling"] == "max":
            vectors = await embed(self.llm, [render(m) for m in new])
            rows = [StoredItem(id=m.turn_id, text="", extra={"session": m.session_id}) for m in new]
            self.store.add(rows, vectors)
            return
        vectors = await embed(self.llm, [self._document(sid) for sid in touched])
        for sid, vector in zip(touched, vectors, strict=True):
            row = StoredItem(id=sid, text="")
            if sid in self.store:
                self.store.replace(row, vector)
            else:
                self.store.add([row], vector[None, :])

    def _document(self, session_id: str) -> str:
        return "\n".join(render(m) for m in self.sessions[session_id])

    def _item(self, session_id: str, score: float) -> MemoryItem:
        turns = self.sessions[session_id]
        return MemoryItem(
            id=session_id,
            text=self._document(session_id),
            score=score,
            source_ids=[m.turn_id for m in turns],
            time=turns[0].time,
        )

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        k = self.params["top_k"] if k is None else k
        if not len(self.store):
            return []
        qvec = await embed(self.llm, [query])
        if self.params["pooling"] == "document":
            return [self._item(row.id, s) for row, s in self.store.search(qvec, k)]
        best: dict[str, float] = {}
        for row, score in self.store.search(qvec, len(self.store)):
            best.setdefault(row.extra["session"], score)  # hits come best first
            if len(best) >= k:
                break
        return [self._item(sid, score) for sid, score in best.items()]

    def save(self, directory: Path) -> None:
        self.store.save(directory)
        save_messages(directory / "messages.jsonl", [m for s in self.sessions.values() for m in s])

    def load(self, directory: Path) -> None:
        self.store.load(directory)
        self.sessions = {}
        for m in load_messages(directory / "messages.jsonl"):
            self.sessions.setdefault(m.session_id, []).append(m)

    def stored_ids(self) -> set[str] | None:
        return {m.turn_id for session in self.sessions.values() for m in session}

    def stats(self) -> dict[str, Any]:
        tokens = sum(count_tokens(m.content) for s in self.sessions.values() for m in s)
        return {"items": len(self.sessions), "tokens_written": tokens, "writer_calls": 0}
