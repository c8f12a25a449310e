"""Linked notes [A-Mem-style].

Every message becomes a note: the ``memory_writer`` adds keywords, tags and a one-sentence
context, and the note is embedded as content + keywords + tags + context. A new note links to the
``link_k`` most similar earlier notes whose similarity is at least ``link_threshold`` (links are
symmetric). Retrieval returns the ``top_k`` notes most similar to the query, each followed by up to
``neighbours`` of its linked notes not already returned.

Departure from A-Mem: links are chosen by embedding similarity rather than by a second writer
call, and older notes are not rewritten ("memory evolution"); both keep the number of writer calls
at one per message, which is what makes the system affordable on LongMemEval-sized haystacks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mnemoflow.memory import writer
from mnemoflow.memory.base import (
    MemoryItem,
    MemorySystem,
    Message,
    WritePattern,
    register,
)
from mnemoflow.memory.buffer import render
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokens import count_tokens
from mnemoflow.memory.vector_store import StoredItem, VectorStore, embed, unseen_messages


def note_document(content: str, note: dict[str, Any]) -> str:
    """The text a note is embedded as."""
    parts = [content]
    if note.get("keywords"):
        parts.append("Keywords: " + ", ".join(note["keywords"]))
    if note.get("tags"):
        parts.append("Tags: " + ", ".join(note["tags"]))
    if note.get("context"):
        parts.append("Context: " + note["context"])
    return "\n".join(parts)


@register
class NotesLinked(MemorySystem):
    """One annotated note per message, linked to similar notes; hits bring their neighbours."""

    name: ClassVar[str] = "notes_linked"
    ingest_params: ClassVar[frozenset[str]] = frozenset({"link_k", "link_threshold"})
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: one note (a writer call) and one embedded note per new message
    write_pattern: ClassVar[WritePattern] = WritePattern(
        batch_param=None, writer_tasks=(writer.NOTE,)
    )
    defaults, params_schema = declare_params(
        top_k=Param(5, "integer", minimum=1),
        link_k=Param(3, "integer", minimum=0),
        link_threshold=Param(0.5, "number", minimum=-1, maximum=1),  # cosine similarity
        neighbours=Param(2, "integer", minimum=0),
    )

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.store = VectorStore()
        self.writer = writer.WriterClient(llm)
        self.tokens_written = 0

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        new = unseen_messages(messages, self.store)
        if not new:
            return
        notes = await asyncio.gather(
            *(self.writer.ask(writer.note_request(m), writer.parse_note) for m in new)
        )
        notes = [note or {"keywords": [], "tags": [], "context": ""} for note in notes]
        documents = [note_document(render(m), note) for m, note in zip(new, notes, strict=True)]
        vectors = await embed(self.llm, documents)
        for m, note, vector in zip(new, notes, vectors, strict=True):
            links = [
                item.id
                for item, score in self.store.search(vector, self.params["link_k"])
                if score >= self.params["link_threshold"]
            ]
            for other in links:
                linked = self.store.get(other)
                linked.extra["links"] = linked.extra["links"] + [m.turn_id]
            item = StoredItem(
                id=m.turn_id,
                text=render(m),
                source_ids=[m.turn_id],
                time=m.time,
                extra={**note, "links": links},
            )
            self.store.add([item], vector[None, :])
            self.tokens_written += count_tokens(note_document(render(m), note))

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        k = self.params["top_k"] if k is None else k
        if not len(self.store):
            return []
        qvec = (await embed(self.llm, [query]))[0]
        out: list[MemoryItem] = []
        seen: set[str] = set()
        hits = self.store.search(qvec, k)
        seen.update(item.id for item, _ in hits)
        for item, score in hits:
            out.append(self._item(item, score))
            added = 0
            for other in item.extra.get("links", []):
                if added >= self.params["neighbours"] or other in seen:
                    continue
                seen.add(other)
                added += 1
                score = float(np.dot(self.store.vector(other), qvec))
                out.append(self._item(self.store.get(other), score))
        return out

    @staticmethod
    def _item(item: StoredItem, score: float) -> MemoryItem:
        text = item.text
        if item.extra.get("keywords"):
            text += f" [keywords: {', '.join(item.extra['keywords'])}]"
        return MemoryItem(item.id, text, score, list(item.source_ids), item.time)

    def save(self, directory: Path) -> None:
        self.store.save(directory)
        state = {
            "tokens_written": self.tokens_written,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
        }
        (directory / "state.json").write_text(json.dumps(state))

    def load(self, directory: Path) -> None:
        self.store.load(directory)
        state = json.loads((directory / "state.json").read_text())
        self.tokens_written = state["tokens_written"]
        self.writer.calls = state["writer_calls"]
        self.writer.parse_failures = state["parse_failures"]

    def stored_ids(self) -> set[str] | None:
        return self.store.source_ids()

    def stats(self) -> dict[str, Any]:
        links = sum(len(item.extra.get("links", [])) for item in self.store.items) // 2
        return {
            "items": len(self.store),
            "links": links,
            "tokens_written": self.tokens_written,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
        }
