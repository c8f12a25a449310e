"""HelloBench ``avg_score``: one judge call grades every checklist point on five levels; the mean.

Reference (MemoryBench ``src/dataset/HelloBench.py``): a system + user prompt with the instruction,
the response and all checklist points as JSON; each point scored 0 / 0.25 / 0.5 / 0.75 / 1 with a
reason, output as a Python list of ``{checklist_id, reason, evaluation_score}``; temperature 0.8,
max 4096 tokens, top_p 0.1; the item's value is the unweighted mean. The prompt here is written
for this project with the same intent, scale and output format.

Differences (docs/metrics.md): a reply whose list has the wrong length or a score off the five
levels is re-asked and, if still wrong, the item is a counted parse failure with no value (the
reference scores an unparseable point 0 and a wholly failed item 0.0). The judge reads the
response as written; only a response over 15,000 word tokens is cut to its first 16,000 tokens,
as the reference does (the reference also re-joins every response's tokens with spaces).
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.eval.memorybench.judged_score import JudgedScore, load_structure, raw_of
from mnemoflow.llm.types import ChatRequest, UnparseableReply

PROMPT_VERSION = "hellobench-checklist-v1"
TASK = "hellobench_checklist"
METRIC = "avg_score"
LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: The reference's judge sampling; the ``judge`` role's binding decides the real one.
REFERENCE_SAMPLING = {"temperature": 0.8, "max_tokens": 4096, "top_p": 0.1}
TRUNCATE_ABOVE, TRUNCATE_TO = 15000, 16000

SYSTEM = (
    "You are a careful evaluator. You grade responses written by language models against a "
    "checklist of yes/no questions derived from the user's instruction."
)
USER = (
    "Grade the response below against every checklist item. Each item is a yes/no "
    "question about one aspect the response should meet. Give each item one of five "
    "scores:\n"
    "\n"
    "0: the response fails the item, with substantial problems.\n"
    "0.25: the response meets a little of the item; important parts are missing.\n"
    "0.5: the response meets the item in part; the verdict is unclear.\n"
    "0.75: the response meets most of the item; minor improvements remain.\n"
    "1: the response meets the item completely; you find no flaw at all.\n"
    "\n"
    "Be strict but fair, and give a reason for every score. Reserve 1 for items that are "
    "truly perfect.\n"
    "\n"
    "Instruction:\n"
    "{instruction}\n"
    "\n"
    "Response (it may be long; it ends at the END RESPONSE line):\n"
    "{response}\n"
    "END RESPONSE\n"
    "\n"
    "Checklist ({count} items):\n"
    "{checklist}\n"
    "\n"
    "Return a list with exactly {count} entries, one per checklist item, and nothing "
    "else:\n"
    '[{{"checklist_id": <the item\'s id>, "reason": "<why>", "evaluation_score": <0, '
    "0.25, 0.5, 0.75 or 1>}}, ...]"
)


def checklist_texts(checklist: list[Any]) -> list[str]:
    """Each point's question: a string item, or a dict's ``checklist_content`` (or first text)."""
    texts = []
    for item in checklist:
        if isinstance(item, dict):
            text = item.get("checklist_content") or next(
                (v for v in item.values() if isinstance(v, str)), ""
            )
            texts.append(str(text))
        else:
            texts.append(str(item))
    return texts


def shown_response(response: str) -> str:
    from mnemoflow.eval.metrics.meteor import word_tokenize

    tokens = word_tokenize(response)
    return " ".join(tokens[:TRUNCATE_TO]) if len(tokens) > TRUNCATE_ABOVE else response


def request(instruction: str, response: str, checklist: list[Any]) -> ChatRequest:
    shown = shown_response(response)
    prompt = USER.format(
        instruction=instruction,
        response=shown,
        checklist=json.dumps(checklist, ensure_ascii=False),
        count=len(checklist),
    )
    return ChatRequest(
        role="judge",
        task=TASK,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        fields={
            "instruction": instruction,
            "response": shown,
            "checklist": checklist_texts(checklist),
        },
    )


def level(value: Any) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise UnparseableReply(f"evaluation_score {value!r} is not a number") from None
    if score not in LEVELS:
        raise UnparseableReply(f"evaluation_score {score} is not one of {LEVELS}")
    return score


def parser(count: int):
    """Reply -> one score per checklist point, in the reply's order (the mean ignores order)."""

    def parse(text: str) -> list[float]:
        entries = load_structure(text)
        if not isinstance(entries, list) or len(entries) != count:
            got = len(entries) if isinstance(entries, list) else type(entries).__name__
            raise UnparseableReply(f"expected a list of {count} entries, got {got}")
        scores = []
        for entry in entries:
            if not isinstance(entry, dict) or "evaluation_score" not in entry:
                raise UnparseableReply("an entry without evaluation_score")
            scores.append(level(entry["evaluation_score"]))
        return scores

    return parse


async def checklist_score(gateway, instruction: str, response: str, checklist: list[Any]):
    """One judge call for the item; ``avg_score`` = mean of the point scores."""
    if not checklist:
        raise ValueError("HelloBench item: info.checklist is empty")
    reply = await gateway.chat(
        request(instruction, response, checklist), parse=parser(len(checklist))
    )
    scores = reply.parsed if reply.parse_ok else None
    return JudgedScore(
        metric=METRIC,
        value=sum(scores) / len(scores) if scores else None,
        raw_reply=raw_of(reply.raw_replies),
        parse_ok=reply.parse_ok,
        prompt_version=PROMPT_VERSION,
        details={"checklist_scores": scores},
    )
