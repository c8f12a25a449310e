"""Offline judge: normalized token overlap between a response and the reference answer.

"yes" when the response contains at least half of the reference's content words (so a sentence that
states the answer among other words passes, as an LLM judge's "contains or is equivalent" would);
for abstention questions, "yes" when the response declines to answer.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.lexical import content_words, stems, words
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
    """Share of the reference's (stemmed) content words that the response contains."""
    gold = stems(reference)
    if not gold:
        return 0.0
    said = set(stems(response))
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


_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
#: A preference rubric describes the desired answer at length; a response that uses the user's
#: information shares fewer of its words than a short answer's, so the bar is lower.
PREFERENCE_RECALL = 0.25


def numbers(text: str) -> list[int]:
    """Integers written as digits or as number words (zero to twenty)."""
    out = []
    for word in words(text):
        if word.isdigit():
            out.append(int(word))
        elif word in _NUMBER_WORDS:
            out.append(_NUMBER_WORDS[word])
    return out


def _off_by_one_match(reference: str, response: str) -> bool:
    """Every number of the reference is within one of a number in the response."""
    said = numbers(response)
    return all(any(abs(n - m) <= 1 for m in said) for n in numbers(reference))


@handles("judge_longmemeval")
def judge_longmemeval(fields: dict[str, Any]) -> str:
    """Fields: question, reference, response, question_type, abstention (decided by the id).

    The grading rule follows the type: overlap with the answer (single-session, multi-session,
    knowledge-update: extra older information does not hurt an overlap test), off-by-one numbers
    accepted for temporal reasoning, a lower overlap bar against a preference rubric.
    """
    response = fields["response"] or ""
    reference = str(fields["reference"])
    if fields.get("abstention"):
        return "yes" if declines(response) else "no"
    if declines(response):
        return "no"
    qtype = fields.get("question_type")
    if qtype == "single-session-preference":
        return "yes" if overlap_recall(reference, response) >= PREFERENCE_RECALL else "no"
    if qtype == "temporal-reasoning" and numbers(reference):
        others = [w for w in content_words(reference) if not w.isdigit()]
        rest_ok = not others or overlap_recall(" ".join(others), response) >= MIN_RECALL
        return "yes" if rest_ok and _off_by_one_match(reference, response) else "no"
    return "yes" if overlap_recall(reference, response) >= MIN_RECALL else "no"


@handles("judge_locomo")
def judge_locomo(fields: dict[str, Any]) -> str:
    """Fields: question, reference, response. CORRECT when the response covers the gold answer."""
    response = fields["response"] or ""
    if declines(response):
        return "The response does not give an answer. WRONG"
    if overlap_recall(str(fields["reference"]), response) >= MIN_RECALL:
        return "The response states the gold answer. CORRECT"
    return "The response does not contain the gold answer. WRONG"
