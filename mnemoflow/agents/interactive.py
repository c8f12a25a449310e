"""An interactive assistant: a model that acts in live sessions with a memory system (AMemGym).

Every memory system can be the memory of an interactive assistant; the prompt shape follows the
reference agent the system stands for (AMemGym ``assistants/*``, see docs/interactive.md):

- ``full_context`` is *native*: the whole history (what ``retrieve`` returns; configure no
  truncation with a large ``max_tokens``) as chat turns, then the new message; no system prompt.
- systems with the AMemGym write buffer (``rag``, ``agentic_external``, ``agentic_incontext``) are
  RAG / AWE / AWI: a system prompt with the memories (``agentic_incontext``: all of them; the
  others: ``top_k`` retrieved for the query), ordered by time, then the buffered messages (the
  local window) as chat turns, then the new message.
- any other system (generic path): the retrieved items in the system prompt, the current
  session's earlier turns as chat turns (the system has no local window of its own), then the new
  message.

After each act the (user, assistant) pair is added to memory; buffer systems write it as their
buffer rule says, the others store it directly. ``rag`` stores the reference's
"USER INPUT: " / "ASSISTANT RESPONSE: " prefixes (as the speaker, which its rendering puts first).
Questions at a checkpoint (``ask``) read memory but never write it; their search query is the
whole prompt, as in the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.llm.types import Reply, prompt_request
from mnemoflow.memory.base import MemoryItem, MemorySystem, Message
from mnemoflow.memory.buffer import MessageBuffer, is_window

ACT_TASK = "interactive_act"

SYSTEM_IN_CONTEXT = (
    "You are a helpful AI. Respond according to memories of the user.\n"
    "User memories ordered by time (earliest to latest):\n{memories}"
)
SYSTEM_RETRIEVED = (
    "You are a helpful AI. Respond according to retrieved memories.\n"
    "Relevant user memories ordered by time (earliest to latest):\n{memories}"
)

#: What a native agent's prompt that outgrows the model's context window does when the role sets
#: no ``overflow``: drop the oldest turns, as the AMemGym authors ran a model "with FIFO
#: truncation after context overflow" (their published results table). The other agents put
#: their memories into the system prompt, which is not cut: they fail instead (docs/gateway.md).
NATIVE_OVERFLOW = "truncate_oldest"

#: Speakers under which ``rag`` stores messages: its rendering "speaker: content" then reads as
#: the reference's prefixed memory text.
RAW_SPEAKERS = {"user": "USER INPUT", "assistant": "ASSISTANT RESPONSE"}


def policy_of(memory: MemorySystem) -> str:
    """native | in_context | retrieved | generic: which reference agent the system stands for."""
    if memory.name == "full_context":
        return "native"
    if isinstance(getattr(memory, "buffer", None), MessageBuffer):
        return "in_context" if memory.name == "agentic_incontext" else "retrieved"
    return "generic"


@dataclass
class Session:
    """Where the assistant is: the ids and conversation time its messages are stored under."""

    session_id: str
    time: str
    turns: int = 0  # messages of this session so far (turn ids count on from here)


@dataclass
class InteractiveAgent:
    """One user's assistant: ``act`` answers a session's last user turn and writes memory."""

    memory: MemorySystem
    gateway: Any
    session: Session | None = None
    writes: int = 0  # (user, assistant) pairs handed to memory
    policy: str = field(init=False)

    def __post_init__(self) -> None:
        self.policy = policy_of(self.memory)

    def begin_session(self, session_id: str, time: str) -> None:
        self.session = Session(session_id, time)

    def _message(self, role: str, content: str) -> Message:
        assert self.session is not None, "begin_session first"
        self.session.turns += 1
        speaker = RAW_SPEAKERS[role] if self.memory.name == "rag" else role
        return Message(
            turn_id=f"{self.session.session_id}_{self.session.turns}",
            session_id=self.session.session_id,
            role=role,
            content=content,
            speaker=speaker,
            time=self.session.time,
        )

    async def memorize(self, user_text: str, assistant_text: str) -> None:
        """The write path shared by acting and off-policy replay: add one round's pair."""
        pair = [self._message("user", user_text), self._message("assistant", assistant_text)]
        await self.memory.add(pair, {"session_id": pair[0].session_id})
        self.writes += 1

    async def _context(
        self, query: str, session_turns: list[dict[str, str]]
    ) -> tuple[str | None, list[dict[str, str]], list[MemoryItem]]:
        """(system prompt, None for native; chat turns before the new message; memory items
        shown)."""
        items = await self.memory.retrieve(query)
        if self.policy == "native":
            shown = {item.id for item in items}
            history = [m for m in self.memory.messages if m.turn_id in shown]
            turns = [{"role": m.role, "content": m.content} for m in history]
            return None, turns, items  # the reference's native agent sends no system prompt
        if self.policy in ("in_context", "retrieved"):
            stored = [item for item in items if not is_window(item)]
            window = self.memory.buffer.messages
            turns = [{"role": m.role, "content": m.content} for m in window]
            template = SYSTEM_IN_CONTEXT if self.policy == "in_context" else SYSTEM_RETRIEVED
        else:
            stored, turns = items, list(session_turns)
            template = SYSTEM_RETRIEVED
        ordered = sorted(stored, key=lambda item: item.time or "")
        memories = "\n".join(f"- {item.text}" for item in ordered)
        return template.format(memories=memories), turns, ordered

    def _shown(self, items: list[MemoryItem], turns: list[dict[str, str]]) -> list[dict[str, str]]:
        """What the model is shown, oldest first, with who said it where that is known: the
        memory items (a stored message's speaker label names its role; a note has none), then
        the chat turns (native: the whole history, which the items only point to)."""
        shown = [] if self.policy == "native" else [{"role": "", "text": i.text} for i in items]
        return shown + [{"role": t["role"], "text": t["content"]} for t in turns]

    async def act(self, history: list[Any]) -> str:
        """Answer the last user turn of the session ``history``, then memorize the round."""
        message = history[-1].content
        earlier = [{"role": t.role, "content": t.content} for t in history[:-1]]
        system, turns, items = await self._context(message, earlier)
        fields = {"message": message, "context": self._shown(items, turns)}
        request = prompt_request("agent", ACT_TASK, message, fields, system=system, history=turns)
        request.overflow = self._overflow()
        reply = await self.gateway.chat(request)
        await self.memorize(message, reply.text)
        return reply.text

    async def memories_shown(self, prompt: str) -> str:
        """The memory lines the system prompt shows for ``prompt`` ("- text" each, oldest
        first; no local window): what self-evolution feedback reports as the memories."""
        _, _, items = await self._context(prompt, [])
        return "\n".join(f"- {item.text}" for item in items)

    async def ask(
        self,
        prompt: str,
        task: str,
        fields: dict[str, Any],
        parse: Callable[[str], Any],
    ) -> Reply:
        """A checkpoint question or recall probe: memory is read (query = the whole prompt),
        never written. ``fields`` get ``context``: what the model is shown, oldest first."""
        system, turns, items = await self._context(prompt, [])
        fields = {**fields, "context": self._shown(items, turns)}
        request = prompt_request("agent", task, prompt, fields, system=system, history=turns)
        request.overflow = self._overflow()
        return await self.gateway.chat(request, parse=parse)

    def _overflow(self) -> str | None:
        """The family default for a prompt too long for the model (``models.agent.overflow``
        wins): the native agent truncates its oldest turns, the others fail."""
        return NATIVE_OVERFLOW if self.policy == "native" else None
