"""A base for systems that keep the raw messages they were given (full context, BM25, dense).

Saving the messages themselves (not an index) keeps snapshots small, portable across library
versions, and exactly reproducible: indexes are rebuilt deterministically on load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemoflow.lexical import count_tokens
from mnemoflow.memory.base import MemorySystem, Message, load_messages, save_messages

MESSAGES_FILE = "messages.jsonl"


class MessageStoreSystem(MemorySystem):
    """Keeps every added message in order; subclasses decide how to retrieve."""

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm=llm, seed=seed)
        self.messages: list[Message] = []
        self._dirty = True

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        self.messages.extend(messages)
        self._dirty = True

    def save(self, directory: Path) -> None:
        save_messages(Path(directory) / MESSAGES_FILE, self.messages)

    def load(self, directory: Path) -> None:
        self.messages = load_messages(Path(directory) / MESSAGES_FILE)
        self._dirty = True

    def stored_ids(self) -> set[str] | None:
        return {m.turn_id for m in self.messages}

    def stats(self) -> dict[str, Any]:
        return {
            "items": len(self.messages),
            "tokens_written": sum(count_tokens(m.content) for m in self.messages),
            "writer_calls": 0,
        }


def render(message: Message) -> str:
    """How a stored message is shown to the reader: ``speaker: content``."""
    return f"{message.speaker or message.role}: {message.content}"
