"""WritingBench ``score``: the critic grades a response against all of its criteria at once, 1-10.

Reference (MemoryBench ``src/dataset/writingbench/``): the WritingBench critic model
(WritingBench-Critic-Model-Qwen-7B behind vLLM) gets a system line casting it as an expert
evaluator and one prompt with the scoring bands (1-2 … 9-10), the rules (strict, not fooled by
length or format, an overview that does not do the task fails), the criteria, the query and the
response; it answers JSON ``{"score": <1-10>, "reason": "..."}``. Temperature 1.0, top_p 0.95,
max 2048 tokens. A reply is accepted only with an integer score 1-10 and a string reason.

Here the call goes to its own ``critic`` role (unbound, it takes the ``judge`` binding; bind it
to the critic model to reproduce the paper). The prompt is written for this project with the same
bands, rules and output. Difference: after the gateway's re-asks, an unparseable item is a
counted failure with no value (the reference retries 5 x 3 times and then raises, aborting).
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.eval.memorybench.judged_score import JudgedScore, load_structure, raw_of
from mnemoflow.llm.types import ChatRequest, UnparseableReply, prompt_request

PROMPT_VERSION = "writingbench-critic-v1"
TASK = "writingbench_critic"
METRIC = "score"
ROLE = "critic"
REFERENCE_SAMPLING = {"temperature": 1.0, "top_p": 0.95, "max_tokens": 2048}

SYSTEM = "You are an expert evaluator, experienced in judging responses to writing requests."
USER = (
    "Score the Response to the Query against the Criteria, following the scoring rules.\n"
    "\n"
    "Scoring rules:\n"
    "1-2: critical deficiencies and major problems; the response does not work.\n"
    "3-4: below average; clear shortcomings that hurt its effectiveness.\n"
    "5-6: average; adequate, meets the essential requirements, nothing more.\n"
    "7-8: above average; competent and strong, minor refinements needed.\n"
    "9-10: exceptional; every aspect handled optimally, no flaw.\n"
    "\n"
    "- Justify the score with specific strengths or weaknesses, quoting the response.\n"
    "- Be strict: do not be swayed by length or formatting.\n"
    "- Watch for content that only looks substantial but is invented.\n"
    "- A response that only introduces or outlines without doing the task has failed.\n"
    "- The score is one integer from 1 to 10.\n"
    "\n"
    "Criteria:\n"
    "{criteria}\n"
    "\n"
    "Query:\n"
    "{query}\n"
    "\n"
    "Response:\n"
    "{response}\n"
    "\n"
    "Criteria again:\n"
    "{criteria}\n"
    "\n"
    "Answer with this JSON object only (no double quotes inside the reason):\n"
    '{{"score": <integer 1-10>, "reason": "<justification>"}}'
)


def request(query: str, response: str, criteria: Any) -> ChatRequest:
    if isinstance(criteria, str):
        criteria_text = criteria
    else:
        criteria_text = json.dumps(criteria, ensure_ascii=False)
    prompt = USER.format(criteria=criteria_text, query=query, response=response)
    fields = {"query": query, "response": response, "criteria": criteria_text}
    return prompt_request(ROLE, TASK, prompt, fields, system=SYSTEM)


def parse_critic(text: str) -> int:
    """``{"score": 1..10, "reason": str}``; 7.0 counts as 7 (the reference's ``in [1..10]``)."""
    result = load_structure(text)
    if not isinstance(result, dict) or "score" not in result or "reason" not in result:
        raise UnparseableReply("expected an object with 'score' and 'reason'")
    score, reason = result["score"], result["reason"]
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise UnparseableReply(f"score {score!r} is not an integer")
    if not 1 <= score <= 10:  # first: inf / nan (JSON 1e999, Infinity, NaN) fail here
        raise UnparseableReply(f"score {score} is outside 1-10")
    if score != int(score):
        raise UnparseableReply(f"score {score!r} is not an integer")
    if not isinstance(reason, str):
        raise UnparseableReply("reason is not a string")
    return int(score)


async def critic_score(gateway, query: str, response: str, criteria: Any) -> JudgedScore:
    reply = await gateway.chat(request(query, response, criteria), parse=parse_critic)
    return JudgedScore(
        metric=METRIC,
        value=float(reply.parsed) if reply.parse_ok else None,
        raw_reply=raw_of(reply.raw_replies),
        parse_ok=reply.parse_ok,
        prompt_version=PROMPT_VERSION,
    )
