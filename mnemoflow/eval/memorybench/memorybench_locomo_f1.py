"""LoCoMo F1 as MemoryBench scores its Locomo-k items (``src/dataset/Locomo.py:evaluate_single``).

The per-category rules are LoCoMo's official ones (:mod:`mnemoflow.eval.metrics.locomo_f1`). What
MemoryBench adds: a category-5 item is a two-option question ("Select the correct answer: (a) ...
(b) ...") whose gold is the option object ``{"a": text, "b": text}`` (the release stores it as
JSON text). A reply that is just an option letter, ``a`` / ``(a)`` / ``b`` / ``(b)`` (any case,
surrounding spaces ignored), is replaced by that option's text before the "not mentioned" check.

Difference from the reference (docs/memorybench.md): it maps EVERY reply of length 1 or 3 to an
option (``a`` or ``(a)`` anywhere in it -> a, anything else -> b), so "yes", "n/a" or "no." would
count as option (b); here only the four option replies are mapped, other replies are scored as
written.
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.eval.metrics.locomo_f1 import adversarial_score, locomo_f1

OPTION_REPLIES = {"a": "a", "(a)": "a", "b": "b", "(b)": "b"}


def options_of(golden: Any) -> dict[str, str]:
    """The ``{"a", "b"}`` options of a category-5 gold (an object or its JSON text)."""
    options = json.loads(golden) if isinstance(golden, str) else golden
    if not isinstance(options, dict) or not {"a", "b"} <= set(options):
        raise ValueError(f"a category-5 gold must be an object with options a and b: {golden!r}")
    return {key: str(options[key]) for key in ("a", "b")}


def chosen_text(response: str, golden: Any) -> str:
    """The text a category-5 reply stands for: an option letter becomes its option's text."""
    letter = OPTION_REPLIES.get(str(response).strip().lower())
    return options_of(golden)[letter] if letter else str(response)


def memorybench_locomo_f1(response: str, golden: Any, category: int) -> float:
    """MemoryBench's ``f1`` of a Locomo-k item."""
    response = "" if response is None else str(response)
    if category == 5:
        return adversarial_score(chosen_text(response, golden))
    return locomo_f1(response.strip(), str(golden), category)
