"""``full_context``: the whole history in the prompt, truncated to a token budget.

When the history is longer than ``max_tokens`` the *newest* messages are kept, because for memory
questions recent state matters most; LongMemEval's official long-context reader instead keeps the
beginning of the history string. The difference is deliberate and documented in docs/static-qa.md.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.lexical import count_tokens
from mnemoflow.memory.base import MemoryItem, register
from mnemoflow.memory.message_store import MessageStoreSystem, render


@register
class FullContext(MessageStoreSystem):
    """Every message, newest kept when over the token budget (a long-context reader)."""

    name = "full_context"
    defaults: dict[str, Any] = {"max_tokens": 8000}

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        budget = int(self.params["max_tokens"])
        kept: list[MemoryItem] = []
        used = 0
        for message in reversed(self.messages):
            text = render(message)
            cost = count_tokens(text)
            if used + cost > budget:
                break
            used += cost
            kept.append(
                MemoryItem(
                    id=message.turn_id,
                    text=text,
                    score=0.0,
                    source_ids=[message.turn_id],
                    time=message.time,
                )
            )
        kept.reverse()  # chronological order for the reader
        return kept
