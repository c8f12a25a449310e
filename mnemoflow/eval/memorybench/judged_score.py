"""What a MemoryBench judge metric returns, and the strict reply parsers the judges share.

A judged value is stored with every raw reply and ``parse_ok``; a reply that never parses gives
``value=None`` and ``parse_ok=False`` (counted by the gateway's ledger), never a guessed 0.
``memorybench_metrics.evaluate_item_all`` maps a :class:`JudgedScore` onto its ``ItemScore``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.eval.metrics import verdicts
from mnemoflow.llm.types import UnparseableReply


@dataclass
class JudgedScore:
    metric: str
    value: float | None
    raw_reply: str
    parse_ok: bool
    prompt_version: str
    details: dict[str, Any] = field(default_factory=dict)


def raw_of(replies: list[str]) -> str:
    """One reply as itself; several (re-asks, several calls) as a JSON list, in order."""
    return replies[0] if len(replies) == 1 else json.dumps(replies, ensure_ascii=False)


_FENCE = re.compile(r"```(?:json|python|JSON)?\s*\n?(.*?)\n?\s*```", re.DOTALL)


def unfenced(text: str) -> str:
    """The body of the first fenced block, or the whole text when there is no fence."""
    match = _FENCE.search(text)
    return (match.group(1) if match else text).strip()


def load_structure(text: str) -> Any:
    """JSON, or a Python literal (the HelloBench prompt asks for a "Python List"); else raise."""
    body = unfenced(text)
    if not body:
        raise UnparseableReply("empty reply")
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise UnparseableReply(f"neither JSON nor a Python literal: {exc}") from None


def single_integer(text: str, low: int, high: int) -> int:
    """The reply's final explicit score, an integer in [low, high] ("7", "**7**", "7/10",
    "Score: 7.", "On a scale of 1 to 10 I give 8"): :func:`mnemoflow.eval.metrics.verdicts.score`.

    The reference takes the first ``\\b([1-9]|10)\\b`` match, which reads "On a scale of 1 to 10
    I give 8" as 1; here a reply with no score, a fraction, or two different scores is
    unparseable and re-asked.
    """
    return verdicts.score(text, low, high)


def json_rating(text: str, high: int) -> int:
    """The ``rating`` of the reply's JSON object, an integer from 1 to ``high`` (else re-asked);
    the object may be fenced or follow an explanation (:func:`.verdicts.json_field`)."""
    rating = verdicts.json_field(text, "rating")
    if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= high:
        raise UnparseableReply(f"rating {rating!r} is not an integer 1-{high}")
    return rating
