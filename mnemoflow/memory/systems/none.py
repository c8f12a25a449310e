"""``none``: no memory at all (LongMemEval "no history", MemoryBench "Vanilla")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemoflow.memory.base import MemoryItem, MemorySystem, Message, register


@register
class NoMemory(MemorySystem):
    """Remembers nothing; the lower bound every memory system is compared with."""

    name = "none"
    ingest_params = frozenset()
    ingest_roles = ()
    query_roles = ()
    defaults: dict[str, Any] = {}
    params_schema: dict[str, Any] = {}

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        return None

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        return []

    def save(self, directory: Path) -> None:
        (Path(directory) / "none.txt").write_text("stateless\n", encoding="utf-8")

    def load(self, directory: Path) -> None:
        return None

    def stored_ids(self) -> set[str] | None:
        return set()

    def stats(self) -> dict[str, Any]:
        return {"items": 0, "tokens_written": 0, "writer_calls": 0}
