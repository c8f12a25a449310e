"""Benchmark judges: LongMemEval's per-type yes/no judge and the LoCoMo "J" (CORRECT / WRONG) judge.

Prompts are written for this project with the intent of the official ones:

- LongMemEval (``src/evaluation/evaluate_qa.py``): one prompt per question type. The type decides
  the grading rule, but abstention is decided by the question id (``_abs``), never by the type,
  exactly as the official script does. Temperature 0, one user message.
- LoCoMo J (the judge used by memory-system papers after Mem0): generous CORRECT / WRONG against
  the gold answer; category 5 (adversarial) has no gold answer and is not judged. J is stored beside
  the official F1 (``mnemoflow.eval.metrics.locomo_f1``) as its own metric, never mixed into it.

Every request carries a task tag and structured fields so the offline backend can answer it
(handlers in ``mnemoflow/llm/offline/judge.py``). Replies are parsed strictly, through the
gateway (``parse=``): a reply that is neither a clear yes/no (CORRECT/WRONG) is re-asked up to the
judge's ``max_parse_retries``; only what still does not parse after the last attempt is a parse
failure, stored with ``parse_ok = False`` and no value (never guessed) and counted in the ledger
by the gateway. ``raw_reply`` keeps every raw reply, re-asks included (:func:`stored_replies`).
(Documented difference: the official LongMemEval script counts any reply containing the substring
"yes" as yes.)

``repeats: N`` asks the judge N times with distinct seeds; the stored value is the mean of the
parsed verdicts, and a ``judge_agreement`` row per question says whether all parsed verdicts agree.

Each judgement row names its judge as ``<model>/<prompt version>``; :func:`judge_provenance` gives
the rest (backend, temperature, seeds) for a ``judge.json`` beside the judgements, and warns when
the judge's temperature is not 0, which the official protocols use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.data.locomo import category_of
from mnemoflow.data.tables import JUDGEMENTS, RUN_KEYS
from mnemoflow.eval.benchmark_metric import JUDGES, metric_for
from mnemoflow.eval.metrics import verdicts
from mnemoflow.eval.metrics.locomo_f1 import locomo_f1
from mnemoflow.eval.static_qa.qa_judge import PROMPT_VERSION as QA_VERSION
from mnemoflow.eval.static_qa.qa_judge import judge_request as qa_judge_request
from mnemoflow.eval.static_qa.retrieval import is_abstention
from mnemoflow.llm.gateway import strip_reasoning
from mnemoflow.llm.types import ChatRequest, Reply, UnparseableReply

log = logging.getLogger("mnemoflow")

LONGMEMEVAL_VERSION = "lme-v1"
LOCOMO_J_VERSION = "locomo-j-v1"
LOCOMO_F1_JUDGE = "locomo-f1/official"

LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)

_INTRO = "I will give you a question, a correct answer, and a response from a model. "
_CONTAINS = (
    "Answer yes if the response contains the correct answer. Otherwise, answer no. If the "
    "response is equivalent to the correct answer or contains all the intermediate steps to get "
    "the correct answer, also answer yes. If the response only contains a subset of the "
    "information required by the answer, answer no."
)
_OFF_BY_ONE = (
    " Do not penalize off-by-one errors in counts of days, weeks, months or years: if the question "
    "asks for such a number and the response is off by one (e.g. 19 days when the answer is 18), "
    "the response is still correct."
)
_UPDATED = (
    "Answer yes if the response contains the correct answer. Otherwise, answer no. If the response "
    "mentions some earlier information along with the updated answer, it is still correct as long "
    "as the updated answer is the required one."
)
_TAIL = (
    "\n\nQuestion: {question}\n\nCorrect Answer: {reference}\n\nModel Response: {response}\n\n"
    "Is the model response correct? Answer yes or no only."
)
LONGMEMEVAL_PROMPTS = {
    "single-session-user": _INTRO + _CONTAINS + _TAIL,
    "single-session-assistant": _INTRO + _CONTAINS + _TAIL,
    "multi-session": _INTRO + _CONTAINS + _TAIL,
    "temporal-reasoning": _INTRO + _CONTAINS + _OFF_BY_ONE + _TAIL,
    "knowledge-update": _INTRO + _UPDATED + _TAIL,
    "single-session-preference": (
        "I will give you a question, a rubric describing the desired personalized response, and a "
        "response from a model. Answer yes if the response satisfies the rubric, otherwise no. The "
        "response need not reflect every point of the rubric: it is correct as long as it recalls "
        "and uses the user's personal information correctly.\n\nQuestion: {question}\n\n"
        "Rubric: {reference}\n\nModel Response: {response}\n\n"
        "Is the model response correct? Answer yes or no only."
    ),
}
LONGMEMEVAL_ABSTENTION_PROMPT = (
    "I will give you an unanswerable question, an explanation, and a response from a model. "
    "Answer yes if the model correctly identifies the question as unanswerable: it may say that "
    "the information is incomplete, or that some other information is given but the asked "
    "information is not.\n\nQuestion: {question}\n\nExplanation: {reference}\n\n"
    "Model Response: {response}\n\n"
    "Does the model correctly identify the question as unanswerable? Answer yes or no only."
)

LOCOMO_J_PROMPT = (
    "Label an answer to a question as CORRECT or WRONG. You are given a question that one person "
    "asks another about their earlier conversations, the gold (ground-truth) answer, and a "
    "generated answer.\n\n"
    "The gold answer is usually short. The generated answer may be longer; grade generously: if it "
    "touches on the same topic as the gold answer, it is CORRECT. For questions about time, the "
    "gold answer is a date, month or year; the generated answer may use another format or a "
    "relative reference, and it is CORRECT as long as it refers to the same date or period.\n\n"
    "Question: {question}\nGold answer: {reference}\nGenerated answer: {response}\n\n"
    "First give a one-sentence explanation, then finish with the single word CORRECT or WRONG. "
    "Do not write both words."
)


def longmemeval_request(question: dict[str, Any], response: str) -> ChatRequest:
    """The judge request for one LongMemEval answer (prompt by type, abstention by id)."""
    qtype = question["question_type"]
    abstention = is_abstention(question["question_id"])
    if abstention:
        template = LONGMEMEVAL_ABSTENTION_PROMPT
    elif qtype in LONGMEMEVAL_PROMPTS:
        template = LONGMEMEVAL_PROMPTS[qtype]
    else:
        raise ValueError(
            f"question {question['question_id']}: question_type {qtype!r} is not a LongMemEval "
            f"type {list(LONGMEMEVAL_TYPES)}"
        )
    reference = str(question["answer"])
    prompt = template.format(question=question["question"], reference=reference, response=response)
    return ChatRequest(
        role="judge",
        task="judge_longmemeval",
        messages=[{"role": "user", "content": prompt}],
        fields={
            "question": question["question"],
            "reference": reference,
            "response": response,
            "question_type": qtype,
            "abstention": abstention,
        },
    )


def locomo_request(question: dict[str, Any], response: str) -> ChatRequest:
    """The J judge request for one LoCoMo answer (categories 1-4)."""
    reference = str(question["answer"])
    prompt = LOCOMO_J_PROMPT.format(
        question=question["question"], reference=reference, response=response
    )
    return ChatRequest(
        role="judge",
        task="judge_locomo",
        messages=[{"role": "user", "content": prompt}],
        fields={"question": question["question"], "reference": reference, "response": response},
    )


def parse_yes_no(reply: str) -> float | None:
    """1.0 / 0.0 for the reply's final explicit yes / no
    (:func:`mnemoflow.eval.metrics.verdicts.yes_no`: labelled forms first, "no doubt ... yes" read
    as yes, "yes or no: no" as no); ``None`` when it states neither or both."""
    return _or_none(verdicts.yes_no, reply)


def parse_correct_wrong(reply: str) -> float | None:
    """1.0 / 0.0 for the reply's final explicit CORRECT / WRONG
    (:func:`mnemoflow.eval.metrics.verdicts.correct_wrong`: a JSON ``label``, a labelled or lone
    label first, negation understood: "not correct" is WRONG); ``None`` when it states neither or
    both."""
    return _or_none(verdicts.correct_wrong, reply)


def _or_none(reader: Callable[[str], float], reply: str) -> float | None:
    try:
        return reader(reply or "")
    except UnparseableReply:
        return None


def longmemeval_reference(reply: str) -> float:
    """The official LongMemEval reading (``evaluate_qa.py``): yes when "yes" is anywhere in the
    lower-cased reply, so "No, yesterday's date is wrong" counts as yes. Kept as
    ``value_reference`` beside the verdict read by :func:`parse_yes_no`; read after a leading
    thinking block, as the verdict is, so the two differ by their parse alone."""
    return 1.0 if "yes" in strip_reasoning(reply or "").lower() else 0.0


#: The strict readers behind the verdict functions: their complaint names the label to reply with,
#: so a re-ask asks for the label alone.
_STRICT: dict[Callable, Callable[[str], float]] = {
    parse_yes_no: verdicts.yes_no,
    parse_correct_wrong: verdicts.correct_wrong,
}


@dataclass(frozen=True)
class JudgeKind:
    """One LLM judge: how to build its request, parse its reply, name its metric."""

    metric: str
    version: str
    build: Any
    parse: Any
    task: str
    #: The reference's own reading of a reply, where it parses differently (``value_reference``).
    reference: Callable[[str], float] | None = None


LONGMEMEVAL_JUDGE = JudgeKind(
    "accuracy",
    LONGMEMEVAL_VERSION,
    longmemeval_request,
    parse_yes_no,
    "judge_longmemeval",
    reference=longmemeval_reference,
)
LOCOMO_JUDGE = JudgeKind("j", LOCOMO_J_VERSION, locomo_request, parse_correct_wrong, "judge_locomo")
GENERIC_JUDGE = JudgeKind("accuracy", QA_VERSION, qa_judge_request, parse_yes_no, "judge_qa")

#: The official judges, named after their loaders, and the generic one for every other benchmark.
JUDGES.register("longmemeval")(LONGMEMEVAL_JUDGE)
JUDGES.register("locomo")(LOCOMO_JUDGE)
JUDGES.register("generic")(GENERIC_JUDGE)


def kind_for(spec: dict[str, Any]) -> str:
    """The judge of a benchmark entry, as :func:`~mnemoflow.eval.benchmark_metric.metric_for`
    decides it."""
    return metric_for(spec).judge


def repeat_seeds(repeats: int, seed: int) -> list[int | None]:
    """Seeds of the N asks: the endpoint's own seed for a single ask, distinct seeds otherwise."""
    if repeats < 1:
        raise ValueError(f"judge.repeats must be >= 1, got {repeats}")
    return [None] if repeats == 1 else [seed + r for r in range(repeats)]


def verdict_parser(parse: Callable[[str], float | None]) -> Callable[[str], float]:
    """A gateway parser from a verdict reader: no verdict raises, so the gateway re-asks (asking
    for the label alone, in the words of :mod:`mnemoflow.eval.metrics.verdicts`)."""
    if parse in _STRICT:
        return _STRICT[parse]

    def parser(text: str) -> float:
        verdict = parse(text)
        if verdict is None:
            raise UnparseableReply(f"no verdict in {text[:60]!r}")
        return verdict

    return parser


def stored_replies(replies: list[Reply]) -> str:
    """``raw_reply`` of a judgement: every raw reply the judge gave, re-asks included.

    One ask answered at the first attempt stores the text itself. Otherwise a JSON list with one
    entry per ask (seed): the text when it parsed at once, else the list of its attempts in order
    (e.g. ``["<garbled>", "yes"]`` for a single ask re-asked once).
    """
    entries: list[Any] = [
        reply.raw_replies[0] if len(reply.raw_replies) == 1 else reply.raw_replies
        for reply in replies
    ]
    if len(entries) == 1:
        return entries[0] if isinstance(entries[0], str) else json.dumps(entries[0])
    return json.dumps(entries)


async def _ask(
    gateway,
    kind: JudgeKind,
    request: ChatRequest,
    seeds: list[int | None],
    progress: Any = None,
) -> list[Reply]:
    """One reply per seed, each parsed (and re-asked) by the gateway with the kind's parser."""
    replies = []
    parser = verdict_parser(kind.parse)
    for seed in seeds:
        request.seed = seed
        replies.append(await gateway.chat(request, parse=parser))
        if progress is not None:
            progress.update(1, cache_hit=replies[-1].cache_hit)
    return replies


def reference_value(kind: JudgeKind, replies: list[Reply]) -> float:
    """The reference's reading (mean over the asks) of each ask's first reply, which is all the
    reference would have seen; NaN when the judge's reference parses as :attr:`JudgeKind.parse`
    does (or has no parse of its own)."""
    if kind.reference is None:
        return float("nan")
    firsts = [reply.raw_replies[0] if reply.raw_replies else reply.text for reply in replies]
    return sum(kind.reference(text) for text in firsts) / len(firsts)


def _meta(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    return json.loads(raw) if raw else {}


def _run_keys(answer: dict[str, Any]) -> dict[str, Any]:
    return {name: answer[name] for name, _ in RUN_KEYS}


def _category(question: dict[str, Any]) -> int | None:
    return category_of(question["question_type"], _meta(question.get("meta")))


def judge_request_for(
    benchmark: str, question: dict[str, Any], response: str
) -> ChatRequest | None:
    """The judge's request for one answer (asked once per repeat seed), or ``None`` when no
    model judges it (LoCoMo category 5: the official F1 only)."""
    if benchmark == "locomo" and _category(question) == 5:
        return None
    return JUDGES.get(benchmark).build(question, response)


async def judge_answers(
    gateway,
    benchmark: str,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    repeats: int = 1,
    seed: int = 0,
    progress: Callable[[int], Any] | None = None,
) -> pd.DataFrame:
    """Judge every answer row; returns rows in the JUDGEMENTS schema.

    ``progress(total)`` makes a bar (``mnemoflow.progress.progress`` with its description bound;
    passed in because eval does not import it). It is called here, once the number of judge calls
    is known, and the bar advances by one per call with that call's cache hit, so a judge log shows
    done / total, cache hits, calls/s and ETA.

    ``answers`` needs the run keys, ``question_id`` and ``response``. LongMemEval gives one
    ``accuracy`` row per answer; LoCoMo gives an ``f1`` row (official F1, deterministic) and, for
    categories 1-4, a ``j`` row. With ``repeats > 1`` each judged answer also gets a
    ``judge_agreement`` row (1 if all parsed verdicts agree, NaN when fewer than two parsed).
    """
    kind = JUDGES.get(benchmark)
    judge_name = f"{gateway.model_name('judge')}/{kind.version}"
    seeds = repeat_seeds(repeats, seed)
    by_id = {q["question_id"]: q for q in questions.to_dict("records")}
    rows: list[dict[str, Any]] = []
    jobs = []
    for answer in answers.to_dict("records"):
        qid = answer["question_id"]
        if qid not in by_id:
            raise ValueError(f"answers: question_id {qid!r} is not in the questions table")
        question = by_id[qid]
        response = "" if answer["response"] is None else str(answer["response"])
        base = {**_run_keys(answer), "question_id": qid, "question_type": question["question_type"]}
        if benchmark == "locomo":
            rows.append(
                {
                    **base,
                    "judge": LOCOMO_F1_JUDGE,
                    "metric": "f1",
                    "value": locomo_f1(response, question["answer"], _category(question)),
                    "raw_reply": "",
                    "parse_ok": True,
                    "value_reference": float("nan"),
                }
            )
        request = judge_request_for(benchmark, question, response)
        if request is not None:
            jobs.append((base, request))

    calls = len(jobs) * len(seeds)
    with progress(calls) if progress is not None else contextlib.nullcontext() as bar:
        results = await asyncio.gather(*(_ask(gateway, kind, req, seeds, bar) for _, req in jobs))
    for (base, _), replies in zip(jobs, results, strict=True):
        parsed = [reply.parsed for reply in replies if reply.parse_ok]
        rows.append(
            {
                **base,
                "judge": judge_name,
                "metric": kind.metric,
                "value": sum(parsed) / len(parsed) if parsed else float("nan"),
                "raw_reply": stored_replies(replies),
                "parse_ok": len(parsed) == len(replies),
                "value_reference": reference_value(kind, replies),
            }
        )
        if len(seeds) > 1:
            agree = float(len(set(parsed)) == 1) if len(parsed) >= 2 else float("nan")
            rows.append(
                {
                    **base,
                    "judge": judge_name,
                    "metric": "judge_agreement",
                    "value": agree,
                    "raw_reply": json.dumps(seeds),
                    "parse_ok": len(parsed) >= 2,
                    "value_reference": float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=JUDGEMENTS.names)


def judge_provenance(gateway, benchmark: str, repeats: int, seed: int) -> dict[str, Any]:
    """What produced the judgements (model, prompt version, temperature, seeds) for a JSON file.

    Logs one warning when the judge's temperature is not 0: verdicts are then sampled, and a
    rerun with another cache may judge differently.
    """
    kind = JUDGES.get(benchmark)
    spec = gateway.describe()["judge"]
    if spec["temperature"] != 0:
        log.warning(
            "judge %s: temperature is %s, not 0; verdicts are sampled (set "
            "models.judge.temperature: 0 for reproducible judgements)",
            spec["model"],
            spec["temperature"],
        )
    return {
        "benchmark": benchmark,
        "judge": f"{gateway.model_name('judge')}/{kind.version}",
        "model": spec["model"],
        "backend": spec["backend"],
        "prompt_version": kind.version,
        "temperature": spec["temperature"],
        "repeats": repeats,
        "seeds": repeat_seeds(repeats, seed),
        "f1": LOCOMO_F1_JUDGE if benchmark == "locomo" else None,
    }
