"""LimitGen-Syn ``rating``: max over the response's (up to 3) limitations of a 1-5 rating, given
only when the judge puts the limitation in the paper's aspect AND in the ground-truth subtype.

Reference (MemoryBench ``src/dataset/LimitGen.py``): the response is JSON ``{"limitations":
[...]}`` (fenced or bare; a string becomes one limitation; only the first 3 count). Per limitation
the judge (temperature 0.8) is asked (1) whether it concerns the aspect of the item's error type
("yes"/"no" at the start of the reply), (2) if yes, which subtype of that aspect it is (a number),
and (3) only if that subtype is the ground truth's, how well it matches the ground-truth
limitation (JSON ``{"explanation", "rating": 1-5}``). A limitation that stops early rates 0; the
item's ``rating`` is the max, ``accuracy`` whether any reached step 3.

The prompts are written for this project with the same questions, subtype lists and 1-5 bands.
Differences (docs/metrics.md): a judge reply that does not parse is re-asked and then makes the
item a counted failure with no value (the reference reads it as "invalid" / a raw-text subtype /
rating 0); a response that is not the requested JSON scores 0 without judge calls (the reference
judges the placeholder text "Invalid Message", which cannot match a subtype either).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mnemoflow.data.limitgen import ERROR_TYPES
from mnemoflow.eval.memorybench.judged_score import JudgedScore, json_rating, unfenced
from mnemoflow.eval.metrics import verdicts
from mnemoflow.llm.types import ChatRequest, UnparseableReply

PROMPT_VERSION = "limitgen-v1"
METRIC = "rating"
ASPECT_TASK, SUBTYPE_TASK, RATING_TASK = "limitgen_aspect", "limitgen_subtype", "limitgen_rating"
REFERENCE_SAMPLING = {"temperature": 0.8, "max_tokens": 4096, "top_p": 0.1}
MAX_LIMITATIONS = 3

#: aspect -> its subtypes in the order the classification prompt numbers them: (name, meaning).
SUBTYPES: dict[str, list[tuple[str, str]]] = {
    "methodology": [
        ("low data quality", "unreliable data collection, possibly biased, poorly preprocessed"),
        ("inappropriate method", "a method does not suit the research question and may mislead"),
        ("lack of novelty", "the work barely changes established techniques from prior research"),
        ("limited performance", "results are unimpressive, not robust, do not generalize"),
        ("others", "none of the above"),
    ],
    "experimental design": [
        ("insufficient baseline", "too few well-established methods are compared against"),
        ("limited datasets", "too few datasets, so generality and robustness are unclear"),
        ("inappropriate datasets", "datasets that do not reflect the target task or real use"),
        ("ablation study", "no ablation, so a component's contribution stays unclear"),
        ("others", "none of the above"),
    ],
    "result analysis": [
        ("insufficient metric", "evaluation metrics too few to assess performance fully"),
        ("limited analysis", "little insight into the model's behaviour and failure cases"),
        ("result misalignment", "text and tables or figures disagree on numbers or outcomes"),
        ("misleading conclusion", "conclusions overstate what the evidence shows"),
        ("others", "none of the above"),
    ],
    "literature review": [
        ("limited scope", "the review covers a narrow subset, missing important work"),
        ("irrelevant citations", "references that are irrelevant or outdated"),
        ("inaccurate description", "existing methods are described inaccurately"),
        ("others", "none of the above"),
    ],
}
ASPECT_PROMPT = (
    "Does the following limitation of a scientific paper concern the paper's {aspect}?\n\n"
    'Answer "yes" or "no" only.'
)
SUBTYPE_PROMPT = (
    "Classify the following limitation of a scientific paper into one of these kinds of "
    "{aspect} problem:\n{options}\n\nAnswer with the number of the kind only."
)
RATING_SYSTEM = (
    "You compare two limitations of a scientific paper: one written by a model and one "
    "from the ground truth. Judge how closely the generated limitation matches the "
    "ground truth in content and in specificity. Explain briefly, then rate it from 1 to "
    "5:\n"
    "\n"
    "5: the same content as the ground truth, at a similar level of detail.\n"
    "4: the same content as the ground truth, but less detailed.\n"
    "3: related to the ground truth, but not the same.\n"
    "2: only loosely related to the ground truth.\n"
    "1: unrelated to the ground truth.\n"
    "\n"
    'Answer with a JSON object only: {"explanation": "<brief explanation>", "rating": '
    "<integer 1-5>}"
)
RATING_USER = (
    "Ground-truth limitation:\n{ground_truth}\n\nGenerated limitation:\n{limitation}\n\n"
    "Explain briefly, then rate 1-5."
)


def limitations_of(response: str) -> list[str] | None:
    """The response's limitations (first 3), or None when it is not ``{"limitations": ...}``."""
    try:
        value = json.loads(unfenced(response))["limitations"]
    except (json.JSONDecodeError, TypeError, KeyError):
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value[:MAX_LIMITATIONS]]
    return None


def error_type(info: dict[str, Any]) -> tuple[str, str]:
    category = info.get("category")
    if category not in ERROR_TYPES:
        raise ValueError(f"LimitGen item: info.category must be one of {sorted(ERROR_TYPES)}")
    return ERROR_TYPES[category]


def _chat(role_task: str, system: str, user: str, fields: dict[str, Any]) -> ChatRequest:
    return ChatRequest(
        role="judge",
        task=role_task,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        fields=fields,
    )


def aspect_request(aspect: str, limitation: str) -> ChatRequest:
    return _chat(
        ASPECT_TASK,
        ASPECT_PROMPT.format(aspect=aspect),
        limitation,
        {"aspect": aspect, "limitation": limitation, "subtypes": SUBTYPES[aspect]},
    )


def subtype_request(aspect: str, limitation: str) -> ChatRequest:
    options = "\n".join(
        f"{i}. {name} - {meaning}" for i, (name, meaning) in enumerate(SUBTYPES[aspect], 1)
    )
    return _chat(
        SUBTYPE_TASK,
        SUBTYPE_PROMPT.format(aspect=aspect, options=options),
        limitation,
        {"aspect": aspect, "limitation": limitation, "subtypes": SUBTYPES[aspect]},
    )


def rating_request(ground_truth: str, limitation: str) -> ChatRequest:
    return _chat(
        RATING_TASK,
        RATING_SYSTEM,
        RATING_USER.format(ground_truth=ground_truth, limitation=limitation),
        {"ground_truth": ground_truth, "limitation": limitation},
    )


def parse_yes_no(text: str) -> bool:
    """The reply's final explicit yes / no (:func:`mnemoflow.eval.metrics.verdicts.yes_no`); a reply
    stating neither or both is re-asked. (The reference reads only the reply's start, so
    "Not really: ..." is its "no" and "No doubt, yes" too.)"""
    return verdicts.yes_no(text) == 1.0


def subtype_parser(count: int):
    def parse(text: str) -> int:
        head = text.strip().strip("*\"'")
        if not head or not head[0].isdigit() or not 1 <= int(head[0]) <= count:
            raise UnparseableReply(f"reply does not start with a number 1-{count}")
        if len(head) > 1 and head[1].isdigit():
            raise UnparseableReply(f"reply starts with {head[:2]!r}, not 1-{count}")
        return int(head[0])

    return parse


def parse_rating(text: str) -> int:
    return json_rating(text, 5)


async def _rate_one(gateway, aspect: str, truth_subtype: str, ground_truth: str, limitation: str):
    """(rating or None on a parse failure, subtype name or None, raw replies)."""
    raw: list[str] = []
    reply = await gateway.chat(aspect_request(aspect, limitation), parse=parse_yes_no)
    raw += reply.raw_replies
    if not reply.parse_ok:
        return None, None, raw
    if not reply.parsed:
        return 0, None, raw
    subtypes = SUBTYPES[aspect]
    reply = await gateway.chat(
        subtype_request(aspect, limitation), parse=subtype_parser(len(subtypes))
    )
    raw += reply.raw_replies
    if not reply.parse_ok:
        return None, None, raw
    subtype = subtypes[reply.parsed - 1][0]
    if subtype != truth_subtype:
        return 0, subtype, raw
    reply = await gateway.chat(rating_request(ground_truth, limitation), parse=parse_rating)
    raw += reply.raw_replies
    return (reply.parsed if reply.parse_ok else None), subtype, raw


async def limitgen_rating(gateway, response: str, info: dict[str, Any]) -> JudgedScore:
    """``info``: ``category`` (error type) and ``ground_truth`` (the limitation text)."""
    aspect, truth_subtype = error_type(info)
    limitations = limitations_of(response)
    if not limitations:
        return JudgedScore(
            METRIC, 0.0, "", True, PROMPT_VERSION, {"limitations": None, "accuracy": False}
        )
    ground_truth = str(info.get("ground_truth", ""))
    rated = await asyncio.gather(
        *(_rate_one(gateway, aspect, truth_subtype, ground_truth, lim) for lim in limitations)
    )
    ratings = [rating for rating, _, _ in rated]
    subtypes = [subtype for _, subtype, _ in rated]
    raw = [replies for _, _, replies in rated]
    parse_ok = all(r is not None for r in ratings)
    return JudgedScore(
        metric=METRIC,
        value=float(max(ratings)) if parse_ok else None,
        raw_reply=json.dumps(raw, ensure_ascii=False),
        parse_ok=parse_ok,
        prompt_version=PROMPT_VERSION,
        details={
            "limitations": limitations,
            "ratings": ratings,
            "predicted_subtypes": subtypes,
            "ground_truth_subtype": truth_subtype,
            "accuracy": any(s == truth_subtype for s in subtypes) if parse_ok else None,
        },
    )
