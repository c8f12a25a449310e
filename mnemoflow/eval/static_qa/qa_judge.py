"""The generic QA judge: does the response give the reference answer (or rightly abstain)?

Used for the synthetic benchmark and any benchmark without an official judge prompt. Replies are
parsed by :func:`mnemoflow.eval.static_qa.judges.parse_yes_no`, passed to the gateway as the parser:
anything else is re-asked, and what still does not parse is a parse failure, stored as such, never
guessed.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.eval.static_qa.retrieval import is_abstention as _abstention_id
from mnemoflow.llm.types import ChatRequest, prompt_request

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


def is_abstention(question: dict[str, Any]) -> bool:
    """Abstention is decided by the id (the ``_abs`` convention), never by the question type."""
    return _abstention_id(question["question_id"])


def judge_request(question: dict[str, Any], response: str) -> ChatRequest:
    abstention = is_abstention(question)
    template = _ABSTENTION_PROMPT if abstention else _PROMPT
    prompt = template.format(
        question=question["question"], reference=question["answer"], response=response
    )
    fields = {
        "question": question["question"],
        "reference": question["answer"],
        "response": response,
        "abstention": abstention,
    }
    return prompt_request("judge", "judge_qa", prompt, fields)
