"""RAG-(update_batch, local_window, top_k) as AMemGym defines it.

A short-term buffer holds recent messages. When it holds ``update_batch + local_window`` messages,
the oldest ``update_batch`` are written to the store as raw messages (one item per message,
embedded by the ``embedder`` role) and ``local_window`` stay in context. At read time the raw
query (the user's message or question) retrieves ``top_k`` stored messages; the messages still in
the buffer follow them, because they are in the prompt anyway.
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
    register,
)
from mnemoflow.memory.buffer import BUFFER_PARAMS, MessageBuffer
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.vector_store import VectorStore, search_memory, store_messages


class BufferedStore(MemorySystem):
    """What rag and agentic_external share: a dense store written from the (update_batch,
    local_window) buffer. Retrieval returns the store's ``top_k`` hits, then the messages still in
    the buffer (they are in the prompt anyway); a snapshot holds the store, the buffer and the
    system's :meth:`state`."""

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.buffer = MessageBuffer(self.params["update_batch"], self.params["local_window"])
        self.store = VectorStore()
        self.tokens_written = 0

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        k = self.params["top_k"] if k is None else k
        return await search_memory(self.store, self.llm, query, k) + self.buffer.items()

    def state(self) -> dict[str, Any]:
        """The counters a snapshot keeps besides the store and the buffer."""
        return {"tokens_written": self.tokens_written}

    def restore(self, state: dict[str, Any]) -> None:
        self.tokens_written = state["tokens_written"]

    def save(self, directory: Path) -> None:
        self.store.save(directory)
        self.buffer.save(directory)
        (directory / "state.json").write_text(json.dumps(self.state(), sort_keys=True))

    def load(self, directory: Path) -> None:
        self.store.load(directory)
        self.buffer.load(directory)
        self.restore(json.loads((directory / "state.json").read_text()))

    def stored_ids(self) -> set[str] | None:
        return self.store.source_ids() | self.buffer.turn_ids()

    def stats(self) -> dict[str, Any]:
        return {
            "items": len(self.store),
            "buffered": len(self.buffer.messages),
            "tokens_written": self.tokens_written,
            "writer_calls": 0,
        }


@register
class RAG(BufferedStore):
    """Raw messages written in batches to a dense store; recent ones kept in a local window."""

    name: ClassVar[str] = "rag"
    ingest_params: ClassVar[frozenset[str]] = frozenset({"update_batch", "local_window"})
    ingest_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: each batch leaving the buffer is embedded message by message; no writer
    write_pattern: ClassVar[WritePattern] = WritePattern(buffered=True)
    #: AMemGym's reference configuration rag-2-4-30 (configs/agent/rag-2-4-30.json).
    defaults, params_schema = declare_params(**BUFFER_PARAMS, top_k=Param(30, "integer", minimum=1))

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        for batch in self.buffer.push([m for m in messages if m.content.strip()]):
            batch = [m for m in batch if m.turn_id not in self.store]
            if batch:
                self.tokens_written += await store_messages(self.store, self.llm, batch)
