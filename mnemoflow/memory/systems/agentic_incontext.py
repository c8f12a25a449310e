"""Agentic write, in-context memory [AMemGym AWI].

The ``memory_writer`` maintains a bounded key -> value memory that is placed in the prompt whole.
Messages reach the writer through the (update_batch, local_window) buffer; each batch's reply sets
keys (merging into existing ones: the newer value wins) and deletes keys. With ``prompt: organizer``
the writer gets AMemGym AWI's mem0-style organizer prompt and replies with a flat
``{type: information}`` dict merged by union, so nothing is ever deleted (as in the reference).
Every entry carries the conversation's own timestamp of the message that set it (never the wall
clock) and the turn ids it came from. When the memory holds more than ``max_entries`` keys, the
least recently updated are evicted, which is what bounds the prompt.

``retrieve`` returns the whole memory (oldest update first) followed by the local window: an
in-context memory has no retrieval step, so ``k`` does not cut it.

Self-evolution [AMemGym Table 3]: the organizer prompt's "Types of Information to Remember"
section (``memory_types``) is part of the state, saved in and loaded from every snapshot, so the
next step's updates use what the previous step evolved. ``evolve`` (none | question_only |
complete) says which feedback rewrites it after a checkpoint; the rewrite itself is the agent's
call (mnemoflow/agents/self_evolution.py), since a memory system knows no protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.errors import ConfigError
from mnemoflow.memory import writer
from mnemoflow.memory.base import (
    MemoryItem,
    MemorySystem,
    Message,
    WritePattern,
    register,
)
from mnemoflow.memory.buffer import BUFFER_PARAMS, MessageBuffer
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokens import count_tokens

#: How the types section evolves after a checkpoint (AMemGym's awi-evolve configs).
EVOLVE_VARIANTS = ("none", "question_only", "complete")


@register
class AgenticInContext(MemorySystem):
    """A writer-maintained key -> value memory shown whole in the prompt."""

    name: ClassVar[str] = "agentic_incontext"
    ingest_params: ClassVar[frozenset[str]] = frozenset(
        {"update_batch", "local_window", "max_entries", "prompt", "evolve"}
    )
    ingest_roles: ClassVar[tuple[str, ...]] = ("memory_writer",)
    query_roles: ClassVar[tuple[str, ...]] = ()  # the whole memory is the context
    #: one writer call per batch leaving the buffer (it rewrites the entries; nothing embedded)
    write_pattern: ClassVar[WritePattern] = WritePattern(
        buffered=True, writer_tasks=(writer.ORGANIZE,)
    )
    defaults, params_schema = declare_params(
        **BUFFER_PARAMS,
        max_entries=Param(64, "integer", minimum=1),
        #: kv: set / delete changes; organizer: AMemGym AWI's mem0-style "Personal Information
        #: Organizer" whose flat reply is merged with a dict union (never deletes).
        prompt=Param("kv", enum=["kv", "organizer"]),
        #: none: the section never changes; question_only / complete: rewritten after each
        #: checkpoint from that feedback (AMemGym's awi-evolve variants; needs prompt organizer).
        evolve=Param("none", enum=list(EVOLVE_VARIANTS)),
    )

    @classmethod
    def write_pattern_for(cls, params: dict[str, Any]) -> WritePattern:
        if params.get("prompt", cls.defaults["prompt"]) == "kv":
            return WritePattern(buffered=True, writer_tasks=(writer.KV_UPDATE,))
        return cls.write_pattern

    @classmethod
    def check_params(cls, params: dict[str, Any], where: str) -> None:
        super().check_params(params, where)
        evolve = params.get("evolve", "none")
        if evolve != "none" and params.get("prompt", cls.defaults["prompt"]) != "organizer":
            raise ConfigError(
                f"{where}.evolve: {evolve!r} rewrites the organizer prompt's types section; "
                "set prompt: organizer"
            )

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.buffer = MessageBuffer(self.params["update_batch"], self.params["local_window"])
        self.writer = writer.WriterClient(llm)
        # key -> {"value", "time", "source_ids", "version"}; dict order = order of last update
        self.memory: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.tokens_written = 0
        self.evicted = 0
        #: the organizer's "Types of Information to Remember" section (evolvable state)
        self.memory_types = writer.MEMORY_TYPES
        self.evolutions = 0  # rewrites asked for
        self.evolution_failures = 0  # rewrites whose reply never parsed (section kept)

    def set_memory_types(self, section: str) -> None:
        """Adopt an evolved types section for the next memory updates."""
        if not section.strip():
            raise ValueError("an evolved types section must not be empty")
        self.memory_types = section

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        for batch in self.buffer.push([m for m in messages if m.content.strip()]):
            await self._write(batch)

    async def _write(self, batch: list[Message]) -> None:
        shown = [{"key": k, "value": e["value"], "time": e["time"]} for k, e in self.memory.items()]
        if self.params["prompt"] == "organizer":
            reply = await self.writer.ask(
                writer.organize_request(shown, batch, self.memory_types), writer.parse_organized
            )
        else:
            reply = await self.writer.ask(
                writer.kv_update_request(shown, batch), lambda d: writer.parse_kv(d, len(batch))
            )
        if reply is None:
            return
        sets, deletes = reply
        for key in deletes:
            self.memory.pop(key, None)
        for key, value, numbers in sets:
            origin = [batch[n - 1] for n in numbers] or batch
            self.version += 1
            self.memory.pop(key, None)  # move to the end: most recently updated
            self.memory[key] = {
                "value": value,
                "time": max(m.time for m in origin),
                "source_ids": [m.turn_id for m in origin],
                "version": self.version,
            }
            self.tokens_written += count_tokens(f"{key}: {value}")
        while len(self.memory) > self.params["max_entries"]:
            self.memory.pop(next(iter(self.memory)))
            self.evicted += 1

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        entries = [
            MemoryItem(
                id=f"kv:{key}",
                text=f"{key}: {entry['value']}",
                score=1.0,
                source_ids=list(entry["source_ids"]),
                time=entry["time"],
            )
            for key, entry in self.memory.items()
        ]
        return entries + self.buffer.items()

    def save(self, directory: Path) -> None:
        self.buffer.save(directory)
        state = {
            "memory": [[key, entry] for key, entry in self.memory.items()],
            "version": self.version,
            "tokens_written": self.tokens_written,
            "evicted": self.evicted,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
            "memory_types": self.memory_types,
            "evolutions": self.evolutions,
            "evolution_failures": self.evolution_failures,
        }
        (directory / "state.json").write_text(json.dumps(state, ensure_ascii=False))

    def load(self, directory: Path) -> None:
        self.buffer.load(directory)
        state = json.loads((directory / "state.json").read_text())
        self.memory = {key: entry for key, entry in state["memory"]}
        self.version = state["version"]
        self.tokens_written = state["tokens_written"]
        self.evicted = state["evicted"]
        self.writer.calls = state["writer_calls"]
        self.writer.parse_failures = state["parse_failures"]
        # the reference's load_state forgets the evolved section; here it is state like the rest
        self.memory_types = state.get("memory_types", writer.MEMORY_TYPES)
        self.evolutions = state.get("evolutions", 0)
        self.evolution_failures = state.get("evolution_failures", 0)

    def stored_ids(self) -> set[str] | None:
        held = {s for entry in self.memory.values() for s in entry.get("source_ids", [])}
        return held | self.buffer.turn_ids()

    def stats(self) -> dict[str, Any]:
        return {
            "items": len(self.memory),
            "buffered": len(self.buffer.messages),
            "tokens_written": self.tokens_written,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
            "evicted": self.evicted,
            "evolutions": self.evolutions,
            "evolution_failures": self.evolution_failures,
        }
