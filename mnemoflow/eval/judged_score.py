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


_OUT_OF_TEN = re.compile(r"/\s*10\b")
_INTEGER = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?(?!\.?\d)")


def single_integer(text: str, low: int, high: int) -> int:
    """The reply's one number, an integer in [low, high] ("7", "**7**", "7/10", "Score: 7.").

    Stricter than the reference's first ``\\b([1-9]|10)\\b`` match, which reads "On a scale of 1
    to 10 I give 8" as 1: a reply with no number, a fraction, or two different numbers is
    unparseable and re-asked.
    """
    numbers = set(_INTEGER.findall(_OUT_OF_TEN.sub("", text)))
    if len(numbers) != 1:
        raise UnparseableReply(f"expected one integer {low}-{high}, found {sorted(numbers)}")
    (number,) = numbers
    if "." in number or not low <= int(number) <= high:
        raise UnparseableReply(f"expected an integer {low}-{high}, got {number}")
    return int(number)


def json_rating(text: str, high: int) -> int:
    """The ``rating`` of a JSON object reply, an integer from 1 to ``high`` (else re-asked)."""
    result = load_structure(text)
    if not isinstance(result, dict) or "rating" not in result:
        raise UnparseableReply("expected an object with 'rating'")
    rating = result["rating"]
    if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= high:
        raise UnparseableReply(f"rating {rating!r} is not an integer 1-{high}")
    return rating
