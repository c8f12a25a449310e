"""The short-term message buffer of AMemGym's RAG-(update_batch, local_window, top_k) agents.

AMemGym's RAG baseline keeps recent messages in the prompt and writes older ones to a store in
batches: when the buffer holds ``update_batch + local_window`` messages, the oldest
``update_batch`` are written and the newest ``local_window`` stay in context. The same buffer
feeds the agentic writers (``agentic_external``, ``agentic_incontext``), so a writer call sees
``update_batch`` messages at a time. Messages still in the buffer are always shown to the reader
(they are the "local window"), which is why ``retrieve`` of these systems returns them after the
store's hits.
"""

from __future__ import annotations

from pathlib import Path

from mnemoflow.memory.base import MemoryItem, Message, load_messages, save_messages
from mnemoflow.memory.params import Param

#: Id prefix of the items :meth:`MessageBuffer.items` returns (``window:<turn id>``).
WINDOW_PREFIX = "window:"


def is_window(item: MemoryItem) -> bool:
    """Whether ``item`` is a buffered message of the local window, not a retrieved memory: a
    protocol whose reference has no local window (MemoryBench) leaves these out."""
    return item.id.startswith(WINDOW_PREFIX)


def render(message: Message) -> str:
    """How a raw message reads as a memory, and what is embedded for it: "speaker: content"."""
    return f"{message.speaker or message.role}: {message.content}"


#: Parameters of the AMemGym-style write buffer shared by rag, agentic_external and
#: agentic_incontext (merged into their :func:`~mnemoflow.memory.params.declare_params` table).
BUFFER_PARAMS = {
    "update_batch": Param(2, "integer", minimum=1),
    "local_window": Param(4, "integer", minimum=0),
}


class MessageBuffer:
    def __init__(self, update_batch: int, local_window: int):
        self.update_batch = update_batch
        self.local_window = local_window
        self.messages: list[Message] = []

    def turn_ids(self) -> set[str]:
        """Turn ids still held in the local window (shown to the reader, not yet written)."""
        return {m.turn_id for m in self.messages}

    def push(self, messages: list[Message]) -> list[list[Message]]:
        """Append messages; return the batches (oldest first) that must now be written."""
        batches = []
        for message in messages:
            self.messages.append(message)
            if len(self.messages) >= self.update_batch + self.local_window:
                batches.append(self.messages[: self.update_batch])
                self.messages = self.messages[self.update_batch :]
        return batches

    def items(self) -> list[MemoryItem]:
        """The buffered messages as items, in conversation order (score 0: not retrieved)."""
        return [
            MemoryItem(
                id=f"{WINDOW_PREFIX}{m.turn_id}",
                text=render(m),
                score=0.0,
                source_ids=[m.turn_id],
                time=m.time,
            )
            for m in self.messages
        ]

    def save(self, directory: Path) -> None:
        save_messages(directory / "buffer.jsonl", self.messages)

    def load(self, directory: Path) -> None:
        self.messages = load_messages(directory / "buffer.jsonl")
