"""The generic QA judge: does the response give the reference answer (or rightly abstain)?

Used for the synthetic benchmark and any benchmark without an official judge prompt. The reply must
start with "yes" or "no"; anything else is a parse failure, recorded as such and never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from mnemoflow.llm.types import ChatRequest

PROMPT_VERSION = "qa-v1"

_PROMPT = (
    "I will give you a question, a correct answer, and a response from a model. Answer yes if the "
    "response contains the correct answer or is equivalent to it; a response that gives only part "
    "of the answer is not correct. Answer no otherwise. Reply with yes or no only.\n\n"
    "Question: {question}\nCorrect answer: {reference}\nModel response: {response}\n\n"
    "Is the model response correct?"
)
_ABSTENTION_PROMPT = (
    "I will give you an unanswerable question and a response from a model. Answer yes if the "
    "model correctly identifies the question as unanswerable (it says it does not know or that "
    "the information was never given). Reply with yes or no only.\n\n"
    "Question: {question}\nModel response: {response}\n\nDoes the model abstain?"
)

_VERDICT = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def is_abstention(question: dict[str, Any]) -> bool:
    """Abstention is decided by the id (LongMemEval's ``_abs`` convention) or the synthetic type."""
    return str(question["question_id"]).endswith("_abs")


def judge_request(question: dict[str, Any], response: str) -> ChatRequest:
    abstention = is_abstention(question)
    template = _ABSTENTION_PROMPT if abstention else _PROMPT
    prompt = template.format(
        question=question["question"], reference=question["answer"], response=response
    )
    return ChatRequest(
        role="judge",
        task="judge_qa",
        messages=[{"role": "user", "content": prompt}],
        fields={
            "question": question["question"],
            "reference": question["answer"],
            "response": response,
            "abstention": abstention,
        },
    )


def parse_verdict(reply: str) -> float | None:
    """1.0 for yes, 0.0 for no, None when the reply is neither."""
    match = _VERDICT.match(reply or "")
    if not match:
        return None
    return 1.0 if match.group(1).lower() == "yes" else 0.0
