"""NFCats' 1-5 answer score as MemoryBench judges it (``src/dataset/NFCats.py:evaluate_single``).

The judge role reads the reference's prompt (system "You are a helpful assistant.", the full input
prompt as the question). Its reply is read by :func:`mnemoflow.eval.metrics.verdicts.score` on 1-5:
the final explicit score ("4", "4/5", "4 - ...", "###Score of the answer: 4", "Score: 4 out of 5",
"I rate it 4"); a reply with none, two different ones or one off the scale is re-asked by the
gateway; still unparseable, the item is stored unscored (``parse_ok`` false, no value), counted in
the ledger, and its item value is :data:`FAILURE_SCORE` (the ``NFCats`` family's failure value).

Differences from the reference (docs/memorybench.md): it takes the first integer 1-10 anywhere in
the reply (so "6" or "10" are accepted on a 1-5 scale, and "On a scale of 1 to 5, 4" is its 1),
and an item whose judge never gives a number is left at ``[]``, which its summaries count as 0
(below the scale). Here a failure scores the bottom of the scale, 1, and is
counted, never a silent 0.
"""

from __future__ import annotations

from mnemoflow.eval.metrics import verdicts
from mnemoflow.llm.types import ChatRequest

TASK = "memorybench_nfcats_judge"
SYSTEM_PROMPT = "You are a helpful assistant."
PROMPT = """###Task: Evaluate the answer of a given question. Directly output an integer between 1 and 5 to indicate the score of this answer:
- 1 means the answer is irrelevant to the question,
- 2 means the answer is related to the question, but does not solve the question,
- 3 means the answer only solves a part of the question,
- 4 means the answer solve majority aspects of the question, but not perfect,
- 5 means the answer is perfect to solve the question

###Question: {}

###Answer: {}

###Score of the answer:"""  # noqa: E501
MARKER = "###Score of the answer:"
FAILURE_SCORE = 1.0


def parse_score(text: str) -> int:
    """The reply's final explicit 1-5 score (:func:`mnemoflow.eval.metrics.verdicts.score`); raise
    :class:`UnparseableReply` otherwise."""
    return verdicts.score(str(text), 1, 5)


def question_text(prompt: str) -> str:
    """The question inside the NFCats answer prompt (what the offline judge compares with)."""
    return prompt.rsplit("Question:", 1)[-1].strip()


def judge_request(prompt: str, response: str) -> ChatRequest:
    return ChatRequest(
        role="judge",
        task=TASK,
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": PROMPT.format(prompt, response)},
        ],
        fields={"question": question_text(prompt), "response": response},
    )


async def nfcats_score(prompt: str, response: str, gateway) -> tuple[float, str, bool]:
    """(score 1-5, the judge's raw replies, parse_ok); a failure scores FAILURE_SCORE."""
    reply = await gateway.chat(judge_request(prompt, response), parse=parse_score)
    raw = "\n---\n".join(reply.raw_replies or [reply.text])
    if not reply.parse_ok:
        return FAILURE_SCORE, raw, False
    return float(reply.parsed), raw, True
