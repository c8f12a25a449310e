"""Agentic write, external store [AMemGym AWE; mem0-style].

Messages pass through the same (update_batch, local_window) buffer as ``rag``. Each batch that
leaves the buffer goes to the ``memory_writer`` in two calls, as in mem0: extract standalone
facts, then decide ADD / UPDATE / DELETE / NONE for each fact against the ``similar_k`` most similar
stored facts (shown to the writer with short local ids, so it cannot invent real ones). Facts are
stored with the conversation time of their source messages in a dense index; an UPDATE replaces
the old text (the newer statement wins) and keeps both statements' turn ids as sources. An event
the writer got wrong (an id it was not shown, no text) is dropped alone and counted
(``dropped_events``), as mem0 skips it and applies the others. Retrieval
returns the ``top_k`` facts most similar to the query, then the local window.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mnemoflow.memory import writer
from mnemoflow.memory.base import Message, WritePattern, register
from mnemoflow.memory.buffer import BUFFER_PARAMS
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.systems.rag import BufferedStore
from mnemoflow.memory.tokens import count_tokens
from mnemoflow.memory.vector_store import StoredItem, embed


@register
class AgenticExternal(BufferedStore):
    """LLM-curated facts (add / update / delete) in a dense store, plus a local window."""

    name: ClassVar[str] = "agentic_external"
    ingest_params: ClassVar[frozenset[str]] = frozenset(
        {"update_batch", "local_window", "similar_k"}
    )
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)  # the writer writes only
    #: two writer calls per batch leaving the buffer (extract facts, then decide their events);
    #: the extracted facts are embedded
    write_pattern: ClassVar[WritePattern] = WritePattern(
        buffered=True,
        writer_tasks=(writer.EXTRACT_FACTS, writer.UPDATE_FACTS),
        unit="fact",
    )
    #: (update_batch, local_window, top_k) of AMemGym's reference configuration awe-2-4-30.
    defaults, params_schema = declare_params(
        **BUFFER_PARAMS,
        top_k=Param(30, "integer", minimum=1),
        similar_k=Param(5, "integer", minimum=1),
    )

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.writer = writer.WriterClient(llm)
        self.next_id = 0
        self.events = {event: 0 for event in writer.EVENTS}

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        for batch in self.buffer.push([m for m in messages if m.content.strip()]):
            await self._write(batch)

    async def _write(self, batch: list[Message]) -> None:
        facts = await self.writer.ask(
            writer.extract_facts_request(batch), lambda d: writer.parse_facts(d, len(batch))
        )
        if not facts:
            return
        texts = [text for text, _ in facts]
        vectors = await embed(self.llm, texts)
        candidates: dict[str, None] = {}
        for vector in vectors:
            for item, _ in self.store.search(vector, self.params["similar_k"]):
                candidates[item.id] = None
        # Oldest first, so that among duplicates the writer sees the newest last.
        ordered = sorted(candidates, key=lambda i: self.store.position(i))
        local = {str(n): real for n, real in enumerate(ordered)}
        shown = [{"id": n, "text": self.store.get(real).text} for n, real in local.items()]
        decided = await self.writer.ask(
            writer.update_facts_request(texts, shown),
            lambda d: writer.parse_events(d, len(texts), set(local)),
        )
        if decided is None:
            return
        events, dropped = decided
        self.writer.drop_events(writer.UPDATE_FACTS, dropped)
        await self._apply(events, facts, vectors, batch, local)

    async def _apply(self, events, facts, vectors, batch, local) -> None:
        def sources(fact_index: int | None) -> list[Message]:
            if fact_index is None or not facts[fact_index][1]:
                return batch
            return [batch[n - 1] for n in facts[fact_index][1]]

        # Texts the writer rephrased need their own embedding (fetched in one call).
        rephrased = sorted(
            {
                e["text"]
                for e in events
                if e["event"] in ("ADD", "UPDATE")
                and (e["fact"] is None or e["text"] != facts[e["fact"]][0])
            }
        )
        extra = dict(zip(rephrased, await embed(self.llm, rephrased), strict=True))
        for event in events:
            kind = event["event"]
            self.events[kind] += 1
            target = local.get(event["id"]) if event["id"] is not None else None
            if kind == "NONE" or (target is not None and target not in self.store):
                continue
            if kind == "DELETE":
                self.store.remove(target)
                continue
            vector = extra.get(event["text"])
            if vector is None:
                vector = vectors[event["fact"]]
            origin = sources(event["fact"])
            turn_ids = [m.turn_id for m in origin]
            time = max((m.time for m in origin), default="")
            self.tokens_written += count_tokens(event["text"])
            if kind == "ADD":
                item = StoredItem(f"fact{self.next_id}", event["text"], turn_ids, time)
                self.next_id += 1
                self.store.add([item], vector[None, :])
            else:  # UPDATE: the newer statement wins; both statements' turns stay as sources
                old = self.store.get(target)
                merged = list(dict.fromkeys(turn_ids + old.source_ids))
                history = old.extra.get("history", []) + [old.text]
                item = StoredItem(old.id, event["text"], merged, time, {"history": history})
                self.store.replace(item, vector)

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "next_id": self.next_id,
            "events": self.events,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
            "dropped_events": self.writer.dropped_events,
        }

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.next_id = state["next_id"]
        self.events = state["events"]
        self.writer.calls = state["writer_calls"]
        self.writer.parse_failures = state["parse_failures"]
        self.writer.dropped_events = state.get("dropped_events", 0)  # snapshots before the count

    def stats(self) -> dict[str, Any]:
        return {
            **super().stats(),
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
            "dropped_events": self.writer.dropped_events,
            **{f"events_{k.lower()}": v for k, v in self.events.items()},
        }
