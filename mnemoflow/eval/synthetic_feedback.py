"""The synthetic feedback benchmark's metric: is the gold value in the answer (token overlap 1.0)?

Same entry point as ``eval.memorybench_metrics.evaluate_item`` (question row, response, gateway ->
an item score with ``metric``, ``value``, ``raw_reply``, ``parse_ok``), so the feedback protocols
score either benchmark through one call. No model is asked: the gold value is a short phrase, and
requiring every one of its content words keeps a near-miss (another subject's value) at 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
