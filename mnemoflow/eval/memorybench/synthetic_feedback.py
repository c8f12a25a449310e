"""The synthetic feedback benchmark's metric: is the gold value in the answer (token overlap 1.0)?

Same entry point as ``eval.memorybench.memorybench_metrics.evaluate_item`` (question row, response,
gateway -> an item score with ``metric``, ``value``, ``raw_reply``, ``parse_ok``), so the feedback
protocols score either benchmark through one call. No model is asked: the gold value is a short
phrase, and requiring every one of its content words keeps a near-miss (another subject's value) at
0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mnemoflow.eval.memorybench.memorybench_metrics import SimulatedUser
from mnemoflow.lexical import stems

METRIC = "accuracy"


@dataclass
class ItemScore:
    """One item's score (the fields of ``memorybench_metrics.ItemScore``)."""

    metric: str
    value: float
    raw_reply: str = ""
    parse_ok: bool = True


def contains_gold(gold: str, response: str) -> float:
    """1.0 iff every stemmed content word of ``gold`` occurs in ``response``."""
    wanted = stems(gold)
    said = set(stems(response))
    return 1.0 if wanted and all(w in said for w in wanted) else 0.0


async def evaluate_item(question: dict[str, Any], response: str, gateway: Any = None) -> ItemScore:
    return ItemScore(METRIC, contains_gold(str(question["answer"]), response or ""))


def _user_context(info: dict[str, Any], gold: str) -> str:
    if not gold:
        return ""
    return (
        f"Reference Answer: {gold}\n"
        "Use this reference to evaluate whether the assistant's answer matches what you told it."
    )


#: The simulated user of the benchmark's feedback dialogues (mnemoflow's own texts).
USER = SimulatedUser(
    persona=(
        "You are an AI assistant simulating a user who expects the assistant to remember your "
        "preferences, house rules and facts you told it."
    ),
    expertise=(
        "You know exactly what you told the assistant and can recognize whether its answer "
        "matches it."
    ),
    criteria=(
        "Whether the answer matches what you told the assistant",
        "Precision of the answer",
    ),
    additional_context="",
    task="asking about your own preferences, house rules and facts",
    context=_user_context,
)


def simulated_user(dataset: str) -> SimulatedUser:
    """The simulated user of the benchmark's feedback dialogues (one for every dataset)."""
    return USER
