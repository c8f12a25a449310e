"""``full_context``: the whole history in the prompt, truncated to a token budget.

Tokens are counted with OpenAI's o200k_base encoding (:mod:`mnemoflow.memory.tokens`). When the
history is longer than ``max_tokens`` the *newest* messages are kept, because for memory
questions recent state matters most; LongMemEval's official long-context reader instead keeps the
beginning of the history string. The difference is deliberate and documented in docs/static-qa.md.
"""

from __future__ import annotations

from mnemoflow.memory.base import MemoryItem, register
from mnemoflow.memory.message_store import MessageStoreSystem, render
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokens import truncate_newest


@register
class FullContext(MessageStoreSystem):
    """Every message, newest kept when over the token budget (a long-context reader)."""

    name = "full_context"
    ingest_params = frozenset()  # stores every message; max_tokens cuts at retrieval
    ingest_roles = ()
    query_roles = ()
    defaults, params_schema = declare_params(max_tokens=Param(8000, "integer", minimum=1))

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        texts = [render(message) for message in self.messages]
        first = truncate_newest(texts, int(self.params["max_tokens"]))
        return [  # chronological order for the reader
            MemoryItem(
                id=message.turn_id,
                text=text,
                score=0.0,
                source_ids=[message.turn_id],
                time=message.time,
            )
            for message, text in zip(self.messages[first:], texts[first:], strict=True)
        ]
