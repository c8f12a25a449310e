"""The live conversation loop: an assistant (a model with its memory) talks with a simulated user.

One loop serves both families that generate dialogues on-policy; they differ in the simulator and
the schedule, not in the loop:

- MemoryBench dialogue generation: round 0 the assistant answers the item's input; in rounds
  1 .. max_rounds-1 the feedback simulator reacts (like / dislike / copy / none) and either ends the
  conversation or says something the assistant answers. The last answer gets no feedback.
- AMemGym on-policy sessions: round 0 the assistant answers the session's first query; in rounds
  1 .. max_rounds-1 the state-revealing user continues (it never ends early). No follow-up after
  the last round.

So ``max_rounds`` is the number of assistant answers at most, and the simulator speaks between
them. Round ``r`` is the user message ``r`` plus the assistant's answer to it; a user turn carries
the user's reaction to the previous answer (``implicit_action``) and whether it ends the dialogue
(``terminated``; a terminating user turn is recorded but not answered).

The loop knows no memory: an assistant that writes memory as it talks (AMemGym) does so inside its
``act``; one whose dialogues are memorized afterwards (MemoryBench) does nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Turn:
    """One message of a live conversation."""

    role: str  # "user" | "assistant"
    content: str
    round: int = 0
    implicit_action: str = ""  # user turns: reaction to the previous answer
    terminated: bool = False  # user turns: the user ends the conversation here


class Assistant(Protocol):
    """The assistant under test: answers the last user turn of ``history``."""

    async def act(self, history: list[Turn]) -> str: ...


class Simulator(Protocol):
    """A simulated user: the next user turn after ``history`` (which ends on an answer)."""

    async def reply(self, history: list[Turn]) -> Turn: ...


async def converse(
    assistant: Assistant, simulator: Simulator, first_message: str, max_rounds: int
) -> list[Turn]:
    """Run one conversation and return every turn in order (see the module docstring)."""
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1, got {max_rounds}")
    history = [Turn("user", first_message, round=0)]
    for round_ in range(max_rounds):
        answer = await assistant.act(history)
        history.append(Turn("assistant", answer, round=round_))
        if round_ == max_rounds - 1:
            break
        user = await simulator.reply(history)
        user.role, user.round = "user", round_ + 1
        history.append(user)
        if user.terminated:
            break
    return history


def dialogue_rows(turns: list[Turn], **keys: Any) -> list[dict[str, Any]]:
    """Rows of the ``dialogues`` table for one conversation; ``keys`` fill the other columns
    (run keys, ``episode_id``, ``dialogue_id``, ``source``)."""
    return [
        {
            **keys,
            "round": turn.round,
            "role": turn.role,
            "content": turn.content,
            "implicit_action": turn.implicit_action,
            "terminated": turn.terminated,
        }
        for turn in turns
    ]


def turns_of(rows: list[dict[str, Any]]) -> list[Turn]:
    """The inverse of :func:`dialogue_rows` (rows of one dialogue, in order): for replay."""
    return [
        Turn(
            role=row["role"],
            content=row["content"],
            round=int(row["round"]),
            implicit_action=row.get("implicit_action") or "",
            terminated=bool(row.get("terminated")),
        )
        for row in rows
    ]
