"""Offline judge: normalized token overlap between a response and the reference answer.

"yes" when the response contains at least half of the reference's content words (so a sentence that
states the answer among other words passes, as an LLM judge's "contains or is equivalent" would);
for abstention questions, "yes" when the response declines to answer.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.lexical import content_words
from mnemoflow.llm.offline import handles

REFUSALS = (
    "i don't know",
    "i do not know",
    "cannot answer",
    "can't answer",
    "not mentioned",
    "no information",
    "not enough information",
    "unanswerable",
)

MIN_RECALL = 0.5


def declines(response: str) -> bool:
    text = response.lower().replace("’", "'")
    return any(phrase in text for phrase in REFUSALS)


def overlap_recall(reference: str, response: str) -> float:
    gold = content_words(reference)
    if not gold:
        return 0.0
    said = set(content_words(response))
    return sum(w in said for w in gold) / len(gold)


@handles("judge_qa")
def judge_qa(fields: dict[str, Any]) -> str:
    """Fields: question, reference, response, abstention (bool)."""
    response = fields["response"] or ""
    if fields.get("abstention"):
        return "yes" if declines(response) else "no"
    if declines(response):
        return "no"
    return "yes" if overlap_recall(str(fields["reference"]), response) >= MIN_RECALL else "no"
