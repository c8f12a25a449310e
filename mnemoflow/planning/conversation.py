"""What an interactive agent reads, before the run: its memory and dialogue played with
stand-in replies of the expected length (AMemGym: :mod:`mnemoflow.planning.interactive`).

A user's sessions are played in order: the session's opening message as the protocol writes it,
the assistant's replies and the simulated user's follow-ups as stand-in texts of their call
sites' expected reply length (:mod:`mnemoflow.planning.tokens`). Each (user, assistant) pair is
memorized as the agent memorizes it; every prompt is then counted as the agent builds it for the
system's policy (:func:`mnemoflow.agents.interactive.policy_of`):

- ``native`` (``full_context``): the conversation so far (the newest ``max_tokens`` of it) as
  chat turns, then the new message;
- ``retrieved`` (a buffered store: ``rag``, ``agentic_external``): a system prompt of the
  ``top_k`` stored items, the local window as chat turns, then the message;
- ``in_context`` (``agentic_incontext``): a system prompt of every memory entry (one per written
  batch, up to ``max_entries``), the local window, then the message;
- ``generic``: a system prompt of ``top_k`` stored messages and the session so far.

A stored fact or entry is as long as the writer's expected reply per fact (the facts are what it
replies); a system whose writer is not known stores messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mnemoflow.agents.interactive import RAW_SPEAKERS, SYSTEM_IN_CONTEXT, SYSTEM_RETRIEVED
from mnemoflow.memory.base import Message, resolve, without_labels
from mnemoflow.planning.tokens import filler, sent_tokens, text_tokens
from mnemoflow.planning.writes import pattern_of, written_batches


def policy(system_spec: dict[str, Any]) -> str:
    """The system's agent policy, from its class (as ``policy_of`` reads it from an instance)."""
    params = without_labels(dict(system_spec))
    cls = resolve(params.get("type") or params.get("class"))
    if cls.name == "full_context":
        return "native"
    if cls.write_pattern.buffered:
        return "in_context" if cls.name == "agentic_incontext" else "retrieved"
    return "generic"


@dataclass
class Reader:
    """One user's assistant as the plan plays it: what is memorized, and the size of each prompt
    the agent sends (as the endpoint of ``backend`` counts it)."""

    system_spec: dict[str, Any]
    backend: str
    #: tokens of one stored fact or memory entry (None: the system stores messages)
    fact_tokens: float | None = None
    messages: list[Message] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # chat-turn tokens of each message

    def __post_init__(self) -> None:
        self.policy = policy(self.system_spec)
        self.pattern, self.params = pattern_of(self.system_spec)
        spec = without_labels(dict(self.system_spec))
        cls = resolve(spec.get("type") or spec.get("class"))
        self.raw = cls.name == "rag"
        self.embeds_queries = "embedder" in cls.query_roles
        self.priming = sent_tokens([], self.backend)
        self.template = {
            "in_context": text_tokens(SYSTEM_IN_CONTEXT.format(memories=""), self.backend),
        }.get(self.policy, text_tokens(SYSTEM_RETRIEVED.format(memories=""), self.backend))

    def memorize(self, session_id: str, user_text: str, reply_text: str) -> None:
        for role, text in (("user", user_text), ("assistant", reply_text)):
            n = len(self.messages)
            speaker = RAW_SPEAKERS[role] if self.raw else role
            message = Message(f"{session_id}_{n}", session_id, role, text, speaker=speaker)
            self.messages.append(message)
            self.sizes.append(text_tokens(text, self.backend))

    def _window(self) -> int:
        """Messages still in the buffer (the newest ones)."""
        if not self.pattern.buffered:
            return 0
        batch = int(self.params.get(self.pattern.batch_param or "", 1) or 1)
        window = int(self.params.get("local_window", 0))
        return len(self.messages) - written_batches(len(self.messages), batch, window) * batch

    def _native_shown(self) -> int:
        """Messages a native prompt shows: the newest that fit ``max_tokens``."""
        budget = int(self.params.get("max_tokens", 10**12))
        shown, total = 0, 0
        for size in reversed(self.sizes):
            if total + size > budget:
                break
            total += size
            shown += 1
        return shown

    def prompt(self, text: str, session_turns: int = 0) -> int:
        """Tokens of the prompt the agent sends for ``text`` (a message or a question);
        ``session_turns``: messages of the current session so far (the generic policy's turns)."""
        own = text_tokens(text, self.backend) + self.priming
        if self.policy == "native":
            return own + sum(self.sizes[len(self.sizes) - self._native_shown() :])
        return round(own + self.template + self._held()[0] + sum(self._turns(session_turns)))

    def chat(self, text: str, session_turns: int = 0) -> list[dict[str, str]]:
        """The prompt :meth:`prompt` counts as messages over the stand-in memory, for its shared
        prefix with earlier prompts: the history a native agent re-sends; the entries an
        in-context agent shows until it writes another; retrieved items differ per query."""
        user = {"role": "user", "content": text}
        if self.policy == "native":
            shown = self.messages[len(self.messages) - self._native_shown() :]
            return [*({"role": m.role, "content": m.content} for m in shown), user]
        _, items, mean = self._held()
        if self.policy == "in_context":
            entry = filler(mean, self.backend)
            system = SYSTEM_IN_CONTEXT.format(
                memories="\n".join(f"- ({j}) {entry}" for j in range(round(items)))
            )
        else:
            system = SYSTEM_RETRIEVED.format(memories=f"- {items:g} items retrieved for {text}")
        count = len(self._turns(session_turns))
        turns = self.messages[len(self.messages) - count :] if count else []
        chat = [{"role": m.role, "content": m.content} for m in turns]
        return [{"role": "system", "content": system}, *chat, user]

    def _turns(self, session_turns: int) -> list[int]:
        """The sizes of the chat turns a non-native prompt shows: the local window (the generic
        policy: the session so far)."""
        window = self._window()
        if self.policy == "generic":
            return self.sizes[len(self.sizes) - session_turns :] if session_turns else []
        return self.sizes[len(self.sizes) - window :] if window else []

    def _held(self) -> tuple[float, float, float]:
        """A non-native prompt's memory: (its tokens, items shown, tokens per item)."""
        window = self._window()
        stored = self.sizes[: len(self.sizes) - window]
        mean = sum(stored) / len(stored) if stored else 0.0
        if self.pattern.unit == "fact" or self.policy == "in_context":
            mean = self.fact_tokens if self.fact_tokens is not None else mean
        batch = int(self.params.get(self.pattern.batch_param or "", 1) or 1)
        batches = len(stored) // batch
        if self.policy == "in_context":  # one entry per written batch, all shown
            items = min(int(self.params.get("max_entries", 10**9)), batches)
        else:  # the top_k of the stored messages (or facts, one per written batch)
            held = (
                batches * self.pattern.facts_per_batch
                if self.pattern.unit == "fact"
                else len(stored)
            )
            items = min(int(self.params.get("top_k", 5)), held)
        return items * mean, items, mean

    def queries_embedded(self) -> bool:
        """Whether a retrieval now embeds its query: a store queried by embedding that holds
        something (an empty one is not searched)."""
        return self.embeds_queries and len(self.messages) > self._window()
