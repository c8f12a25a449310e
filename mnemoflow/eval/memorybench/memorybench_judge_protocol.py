"""MemoryBench's current scoring protocol (``scoring: judge``): every dataset scored by an LLM
judge on 0-10, stored as score / 10 in ``llm_judge_score`` (THUIR/MemoryBench at
:data:`~mnemoflow.eval.memorybench.memorybench_judge_texts.UPSTREAM_COMMIT`; docs/memorybench.md
"Two scoring protocols").

The item-metric interface the feedback protocols and ``mnemoflow score`` call
(:func:`evaluate_item`, :func:`evaluate_item_all`, :func:`item_value`, :func:`check_supported`,
:func:`is_judged`, :func:`metric_of`), beside the paper protocol's
:mod:`mnemoflow.eval.memorybench.memorybench_metrics`;
:func:`mnemoflow.eval.benchmark_metric.metric_for` picks one of the two from the benchmark's
``scoring:``.

Per family (``src/dataset/<family>.py`` at the pinned commit):

- LexEval-* / WritingPrompts: the shared prompt (``judge_one``) with the dataset's rubric (LexEval
  has three: summary with the response's non-whitespace length and a 400-character cap,
  judicial analysis, open QA; each with weights and a prompt-injection guard); 3 tries, max_tokens
  1024. A LexEval judge that fails after its tries stops the run (:class:`JudgeFailed`), as the
  reference raises (so does a WritingBench critic that fails); WritingPrompts' failure is an
  unscored item.
- Locomo-k: the dataset-owned prompt (``judge_prompt``: 5 tries, max_tokens 512) with the
  question, the reference (a category-5 option map as the map), the evidence turns, the category
  and, for category 5, the option guidance.
- JRE-L / JuDGE: five / twelve sub-metric rubrics through ``judge_metric`` (the shared prompt, 3
  tries each), then the dataset-owned merge prompt with the scores / 10 to 4 decimals (5 tries).
- LimitGen-Syn: the paper's aspect / subtype / 1-5 rating pipeline, then the merge prompt with
  the category score (1 or 0) and the best rating / 5.
- IdeaBench: semantic alignment (dataset-owned prompt), the overlap rating 1-10 and the
  reference idea's rank by novelty and feasibility (3 tries each, no system prompt), then the merge
  prompt, and the compact merge prompt when that fails.
- DialSim-*: unchanged (exact match, else the Correct / Wrong judge), 1.0 / 0.0.
- NFCats: its own 1-5 prompt; the first 1-5 digit after "###Score of the answer:"; score / 5.
- HelloBench-*: the checklist judge, mean of the 0-1 point scores; WritingBench-*: the critic's
  1-10 score / 10.

Every judge call goes to the ``judge`` role (WritingBench: ``critic``) with the system prompt
"You are a strict, evidence-based evaluator." A judge that gives no parseable score after its
tries leaves the item unscored (``value`` None, ``parse_ok`` false), counted in the ledger and in
the ``:unscored`` rows, and at the bottom of the scale (0) in the ``:all`` rows: never a silent 0.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench import (
    checklist_judge,
    dialsim_accuracy,
    limitgen,
    nfcats_judge,
    writingbench_critic,
)
from mnemoflow.eval.memorybench import memorybench_judge_texts as texts
from mnemoflow.eval.memorybench.memorybench_metrics import (
    Item,
    ItemScore,
    family_for,
    family_of,
    metric_value,
)
from mnemoflow.eval.memorybench.memorybench_metrics import _info as item_info
from mnemoflow.eval.memorybench.memorybench_metrics import _meta as item_meta
from mnemoflow.eval.memorybench.memorybench_metrics import simulated_user as simulated_user
from mnemoflow.llm.types import ChatRequest, UnparseableReply

METRIC = "llm_judge_score"
TASK = "memorybench_llm_judge"
PROMPT_VERSION = f"memorybench-judge@{texts.UPSTREAM_COMMIT[:7]}"
#: ``judge_one`` tries the shared prompt 3 times, ``judge_prompt`` a dataset-owned prompt 5 times.
SHARED_TRIES, OWNED_TRIES = 3, 5
SHARED_MAX_TOKENS, OWNED_MAX_TOKENS = 1024, 512
#: What ``llm_judge._call_api`` sends with every call (bind the judge role so for a faithful run).
REFERENCE_SAMPLING = {
    "temperature": 0.0,
    "top_p": 0.1,
    "max_tokens": SHARED_MAX_TOKENS,
    "extra_body": {"chat_template_kwargs": {"enable_thinking": False}},
}
#: The upstream normalization statistics on the 0-1 scale (THUIR/MemoryBench @c665dac), shipped.
JUDGE_STATS = (
    Path(__file__).resolve().parents[3]
    / "data"
    / "memorybench"
    / "final_evaluate_summary_wo_details.judge.json"
)


def statistics_file(given: Any, scoring: str, default: Any = None, where: str = "stats") -> Any:
    """The normalization statistics a set is scored with: ``given``; else under ``scoring:
    judge`` the shipped 0-1 statistics (:data:`JUDGE_STATS`); else ``default``, which the paper's
    scoring cannot do without (one line naming ``where``)."""
    if given is not None:
        return given
    if scoring == "judge":
        return JUDGE_STATS
    if default is None:
        raise ConfigError(
            f"{where}: the statistics file of the paper's scoring "
            "(final_evaluate_summary_wo_details.json) is required"
        )
    return default


#: ``_compact``'s cut: longer texts end in "\n[truncated]" after this many characters.
COMPACT_LIMIT = 12000


class JudgeFailed(ValueError):
    """A judge failed where the reference stops the run (LexEval): one line, no traceback."""


# ---- prompts ------------------------------------------------------------------------------------


def compact(value: Any, limit: int = COMPACT_LIMIT) -> str:
    """``_compact``: text as itself, anything else as sorted-key JSON; cut at ``limit``."""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "\n[truncated]"


def shared_prompt(
    dataset: str, user_request: Any, response: Any, info: Mapping[str, Any], rubric: str
) -> str:
    """``build_judge_prompt``: the reference is ``golden_answer``, else ``abstract``, else
    ``ground_truth``, else empty; the annotations are the whole ``info``."""
    reference = info.get("golden_answer", info.get("abstract", info.get("ground_truth", "")))
    return texts.SHARED_PROMPT.format(
        dataset=dataset,
        rubric=rubric,
        user_request=compact(user_request),
        reference=compact(reference),
        annotations=compact(dict(info)),
        response=compact(response),
    )


def metric_prompt(
    dataset: str, metric: str, user_request: Any, response: Any, reference: Any, rubric: str
) -> str:
    """``judge_metric``: one sub-metric through the shared prompt."""
    return shared_prompt(
        dataset,
        user_request,
        response,
        {"golden_answer": reference, "metric": metric},
        texts.METRIC_RUBRIC.format(metric=metric, rubric=rubric),
    )


def non_whitespace_length(text: str) -> int:
    return sum(not ch.isspace() for ch in text)


def lexeval_rubric(dataset: str, response: str) -> str:
    """The rubric of a LexEval dataset; the summary's carries the response's length."""
    if dataset == "LexEval-Summarization":
        return texts.LEXEVAL_SUMMARY_RUBRIC.format(response_length=non_whitespace_length(response))
    if dataset == "LexEval-Judge":
        return texts.LEXEVAL_JUDGE_RUBRIC
    if dataset == "LexEval-QA":
        return texts.LEXEVAL_QA_RUBRIC
    raise ConfigError(f"scoring: judge: no LexEval rubric for dataset {dataset!r}")


def locomo_prompt(question: str, info: Mapping[str, Any], response: str) -> str:
    """``Locomo_Dataset.evaluate_single``'s prompt: the values as Python's ``format`` shows
    them (an option map or an evidence list as its repr), category-5 guidance for category 5."""
    category = info.get("category", "unknown")
    guidance = texts.LOCOMO_CATEGORY_5_GUIDANCE if str(category) == "5" else ""
    return texts.LOCOMO_PROMPT.format(
        rubric=texts.LOCOMO_RUBRIC,
        question=question,
        reference=info.get("golden_answer", ""),
        evidence=info.get("evidence", []),
        category=category,
        category_5_guidance=guidance,
        response=response,
    )


# ---- parsing and asking -------------------------------------------------------------------------

_FENCES = re.compile(r"^```(?:json)?|```$", re.IGNORECASE | re.MULTILINE)


def braced_json(text: str, message: str, *, trailing_commas: bool = False) -> Any:
    """The references' lenient JSON read: the text, else its first "{" to last "}" (a preamble
    skipped), else (``trailing_commas``) that span without trailing commas; else
    :class:`UnparseableReply` with ``message`` (the re-ask shows it to the model)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise UnparseableReply(message)
    span = text[start : end + 1]
    try:
        return json.loads(span)
    except ValueError:
        if not trailing_commas:
            raise UnparseableReply(message) from None
    try:
        return json.loads(re.sub(r",\s*([}\]])", r"\1", span))
    except ValueError:
        raise UnparseableReply(message) from None


def parse_score(raw: str) -> int:
    """``_parse_score``: a JSON object with ``score`` and ``reason`` (fences removed; a preamble
    skipped by reading from the first "{" to the last "}"); the score rounded (Python's round)
    and clamped to 0-10. Anything else raises :class:`UnparseableReply`."""
    text = str(raw or "").strip()
    if not text:
        raise UnparseableReply("empty judge response")
    obj = braced_json(_FENCES.sub("", text).strip(), "judge response is not valid JSON")
    if not isinstance(obj, dict) or "score" not in obj or "reason" not in obj:
        raise UnparseableReply("judge JSON must contain score and reason")
    try:
        number = float(obj["score"])
        score = int(round(number))
    except (TypeError, ValueError, OverflowError):
        raise UnparseableReply("judge score must be numeric") from None
    return max(0, min(10, score))


def judge_request(prompt: str, tries: int, max_tokens: int, fields: dict[str, Any]) -> ChatRequest:
    """One judge call: the protocol's system prompt, ``tries`` attempts in all. ``max_tokens`` is
    the reference's cap for this call, kept in the offline fields (the bound role's sampling is
    what a real endpoint receives; docs/memorybench.md)."""
    return ChatRequest(
        role="judge",
        task=TASK,
        messages=[
            {"role": "system", "content": texts.SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ],
        fields={**fields, "max_tokens": max_tokens},
        max_parse_retries=tries - 1,
    )


async def ask(gateway, prompt: str, tries: int, max_tokens: int, fields: dict[str, Any]):
    """(score 0-10 or None, raw replies, tries used)."""
    reply = await gateway.chat(judge_request(prompt, tries, max_tokens, fields), parse=parse_score)
    raw = list(reply.raw_replies or [reply.text])
    return (reply.parsed if reply.parse_ok else None), raw, reply.attempts


def _raw(replies: list[str]) -> str:
    return "\n---\n".join(replies)


# ---- families -----------------------------------------------------------------------------------


def _user_request(question: Mapping[str, Any]) -> Any:
    """What the reference passes as ``user_prompt``: ``input_prompt``, or the whole
    ``input_chat_messages`` list (the loader keeps it in ``meta``)."""
    messages = item_meta(question).get("input_chat_messages")
    return messages if messages else str(question.get("question", ""))


def _ident(question: Mapping[str, Any]) -> str:
    return str(question.get("question_id", question.get("dataset")))


async def score_shared(dataset, question, info, response, rubric, gateway, stops=False):
    """The shared prompt with ``rubric`` (3 tries); ``stops``: a judge that fails stops the run
    (:class:`JudgeFailed`), as the reference's LexEval does."""
    prompt = shared_prompt(dataset, _user_request(question), response, info, rubric)
    fields = {"kind": "rubric", "dataset": dataset, "response": response,
              "reference": str(info.get("golden_answer", info.get("abstract", "")))}  # fmt: skip
    score, raw, tries = await ask(gateway, prompt, SHARED_TRIES, SHARED_MAX_TOKENS, fields)
    if score is None and stops:
        raise JudgeFailed(
            f"scoring: judge: record {_ident(question)}: the judge gave no parseable score after "
            f"{tries} tries (the reference stops a LexEval run here too)"
        )
    return ItemScore(METRIC, None if score is None else score / 10, _raw(raw),
                     score is not None, PROMPT_VERSION)  # fmt: skip


async def score_locomo(question, info, response, gateway) -> ItemScore:
    prompt = locomo_prompt(str(question.get("question", "")), info, response)
    fields = {
        "kind": "locomo",
        "response": response,
        "reference": info.get("golden_answer", ""),
        "category": info.get("category"),
        "evidence": info.get("evidence", []),
    }
    score, raw, _ = await ask(gateway, prompt, OWNED_TRIES, OWNED_MAX_TOKENS, fields)
    return ItemScore(METRIC, None if score is None else score / 10, _raw(raw),
                     score is not None, PROMPT_VERSION)  # fmt: skip


async def _sub_then_merge(dataset, question, response, gateway, rubrics, reference, merge):
    """``judge_metric`` once per sub-metric rubric (the shared prompt, 3 tries each), then the
    dataset-owned merge prompt ``merge(user_request, [score / 10, ...])`` (5 tries). A sub-judge
    that fails leaves the item unscored without asking the merge (the reference would show it to
    the merge as 0.0000)."""
    user_request = _user_request(question)
    subs: list[float] = []
    raws: list[str] = []
    for metric, rubric in rubrics.items():
        prompt = metric_prompt(dataset, metric, user_request, response, reference, rubric)
        fields = {"kind": "rubric", "dataset": dataset, "metric": metric, "response": response,
                  "reference": str(reference)}  # fmt: skip
        score, raw, _ = await ask(gateway, prompt, SHARED_TRIES, SHARED_MAX_TOKENS, fields)
        raws += raw
        if score is None:
            return ItemScore(METRIC, None, _raw(raws), False, PROMPT_VERSION)
        subs.append(score / 10)
    return await _merge(dataset, merge(user_request, subs), subs, raws, gateway)


async def _merge(dataset, prompt, subs, raws, gateway) -> ItemScore:
    fields = {"kind": "merge", "dataset": dataset, "sub_scores": subs}
    score, raw, _ = await ask(gateway, prompt, OWNED_TRIES, OWNED_MAX_TOKENS, fields)
    raws = [*raws, *raw]
    return ItemScore(METRIC, None if score is None else score / 10, _raw(raws),
                     score is not None, PROMPT_VERSION)  # fmt: skip


def _four(scores: list[float]) -> dict[str, str]:
    return {f"S{i}": f"{s:.4f}" for i, s in enumerate(scores, 1)}


async def score_merged(
    dataset, question, info, response, gateway, *, gold, rubrics, merge_prompt, slots
) -> ItemScore:
    """A sub-then-merge dataset's score: ``rubrics`` against ``info[gold]``, then its
    ``merge_prompt`` with ``slots`` (its names for the input, the output and the gold text)."""
    reference = info[gold]

    def merge(user_request, subs):
        texts_by_slot = dict(zip(slots, (user_request, response, reference), strict=True))
        return merge_prompt.format(**texts_by_slot, **_four(subs))

    return await _sub_then_merge(dataset, question, response, gateway, rubrics, reference, merge)


async def score_limitgen(dataset, question, info, response, gateway) -> ItemScore:
    """The paper's LimitGen pipeline (aspect, subtype, 1-5 rating per limitation; ``limitgen``),
    then the merge prompt with the category score (1 / 0) and the best rating / 5."""
    judged = await limitgen.limitgen_rating(gateway, response, info)
    raws = [judged.raw_reply] if judged.raw_reply else []
    if not judged.parse_ok:
        return ItemScore(METRIC, None, _raw(raws), False, PROMPT_VERSION)
    accuracy = 1.0 if judged.details.get("accuracy") else 0.0
    rating = float(judged.value or 0.0) / 5.0
    prompt = texts.LIMITGEN_MERGE_PROMPT.format(
        INPUT_PROMPT=_user_request(question),
        GENERATED_LIMITATIONS=response,
        GROUND_TRUTH=info.get("ground_truth", ""),
        CATEGORY_SCORE=f"{accuracy:.4f}",
        RELATEDNESS_SCORE=f"{rating:.4f}",
    )
    return await _merge(dataset, prompt, [accuracy, rating], raws, gateway)


def compact_text(value: Any, limit: int) -> str:
    """IdeaBench's ``_compact_text``: ``str`` of the value, cut at ``limit`` + "\n[truncated]"."""
    text = value if isinstance(value, str) else str(value or "")
    return text if len(text) <= limit else text[:limit] + "\n[truncated]"


def hypotheses_of(response: str) -> list[str]:
    """The response's hypotheses (split at the separator, blanks dropped), padded with "NULL" to
    three, sorted (the reference sorts them, so the position says nothing)."""
    found = [h.strip() for h in response.split(texts.IDEA_SEPARATOR) if h.strip()]
    return sorted(found + ["NULL"] * (3 - len(found)))


def hypotheses_text(hypotheses: list[str]) -> str:
    return "\n\n".join(f"Hypothesis {i}: {h}" for i, h in enumerate(hypotheses, 1))


def json_object(text: str) -> dict[str, Any]:
    """IdeaBench's ``_parse_json_object``: the text, else its first "{" to last "}", else that
    span without trailing commas; an object or UnparseableReply."""
    value = braced_json(str(text or "").strip(), "not a JSON object", trailing_commas=True)
    if not isinstance(value, dict):
        raise UnparseableReply("not a JSON object")
    return value


_JSON_FENCE = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL)


def parse_rating(text: str) -> int:
    """The overlap rating: an integer 1-10 under ``rating`` (a ```json fence read first)."""
    text = str(text or "")
    if "```json" in text:
        match = _JSON_FENCE.search(text)
        text = match.group(1) if match else text
    try:
        rating = int(json_object(text).get("rating"))
    except (TypeError, ValueError):
        raise UnparseableReply("expected a JSON rating 1-10") from None
    if not 1 <= rating <= 10:
        raise UnparseableReply(f"rating {rating} is not 1-10")
    return rating


def rank_parser(size: int):
    """The reference idea's position: ``rank`` of a JSON object, or a bare number, 1..size."""

    def parse(text: str) -> int:
        text = str(text or "").strip()
        try:
            value = int(json_object(text).get("rank"))
            if 1 <= value <= size:
                return value
        except (TypeError, ValueError):
            pass
        if text.isdigit() and 1 <= int(text) <= size:
            return int(text)
        raise UnparseableReply(f"expected a rank 1-{size}")

    return parse


async def _plain(gateway, prompt, parse, max_tokens, fields):
    """A user-only call (no system prompt) with 3 tries, as IdeaBench's rating and ranking."""
    request = ChatRequest(
        role="judge",
        task=TASK,
        messages=[{"role": "user", "content": prompt}],
        fields={**fields, "max_tokens": max_tokens},
        max_parse_retries=SHARED_TRIES - 1,
    )
    reply = await gateway.chat(request, parse=parse)
    return (reply.parsed if reply.parse_ok else None), list(reply.raw_replies or [reply.text])


async def score_ideabench(dataset, question, info, response, gateway) -> ItemScore:
    """Semantic alignment (dataset-owned prompt), overlap rating 1-10, the reference's rank by
    novelty and by feasibility ((rank - 1) / hypotheses), then the merge prompt; when the merge
    fails, the compact merge prompt. Any failed call leaves the item unscored."""
    abstract = info["abstract"]
    hypotheses = hypotheses_of(response)
    listed = hypotheses_text(hypotheses)
    raws: list[str] = []

    prompt = texts.IDEABENCH_SEMANTIC_PROMPT.format(
        reference=compact_text(abstract, 700), generated=compact_text(listed, 700)
    )
    fields = {"kind": "rubric", "dataset": dataset, "response": listed, "reference": abstract}
    semantic, raw, _ = await ask(gateway, prompt, OWNED_TRIES, OWNED_MAX_TOKENS, fields)
    raws += raw
    prompt = texts.IDEABENCH_RATING_PROMPT.format(hypotheses=listed, abstract=abstract)
    fields = {"kind": "idea_rating", "response": listed, "reference": abstract}
    rating, raw = await _plain(gateway, prompt, parse_rating, SHARED_MAX_TOKENS, fields)
    raws += raw
    size = len(hypotheses) + 1
    candidates = [f"A: {compact_text(abstract, 350)}"] + [
        f"{chr(ord('A') + i)}: {compact_text(h, 350)}" for i, h in enumerate(hypotheses, 1)
    ]
    ranks = []
    for criteria in ("novelty", "feasibility"):
        prompt = texts.IDEABENCH_RANK_PROMPT.format(
            n=size, criteria=criteria, candidates="\n\n".join(candidates)
        )
        fields = {"kind": "idea_rank", "criteria": criteria, "reference": abstract,
                  "hypotheses": hypotheses}  # fmt: skip
        rank, raw = await _plain(gateway, prompt, rank_parser(size), 128, fields)
        raws += raw
        ranks.append(rank)
    if semantic is None or rating is None or None in ranks:
        # the reference would merge a 0 here
        return ItemScore(METRIC, None, _raw(raws), False, PROMPT_VERSION)
    novelty, feasibility = ((r - 1) / len(hypotheses) for r in ranks)
    supporting = {
        "SEMANTIC_ALIGNMENT_SCORE": f"{semantic / 10:.4f}",
        "IDEA_OVERLAP_SCORE": f"{rating / 10:.4f}",
        "NOVELTY_SCORE": f"{novelty:.4f}",
        "FEASIBILITY_SCORE": f"{feasibility:.4f}",
    }
    subs = [semantic / 10, rating / 10, novelty, feasibility]
    prompt = texts.IDEABENCH_MERGE_PROMPT.format(
        INPUT_CONTEXT=_user_request(question), GENERATED_IDEA=listed, GOLDEN_IDEA=abstract,
        **supporting,
    )  # fmt: skip
    merged = await _merge(dataset, prompt, subs, raws, gateway)
    if merged.parse_ok:
        return merged
    prompt = texts.IDEABENCH_COMPACT_MERGE_PROMPT.format(
        GOLDEN_IDEA=compact_text(abstract, 900), GENERATED_IDEA=compact_text(listed, 900),
        **supporting,
    )  # fmt: skip
    return await _merge(dataset, prompt, subs, merged.raw_reply.split("\n---\n"), gateway)


async def score_dialsim(question, info, response, gateway) -> ItemScore:
    value, raw, ok = await dialsim_accuracy.dialsim_accuracy(
        str(question.get("question", "")), str(info["golden_answer"]), response, gateway
    )
    return ItemScore(METRIC, None if not ok else float(value), raw, ok)


NFCATS_SCORE = re.compile(r"\b([1-5])\b")


def parse_nfcats(text: str) -> int:
    """The pinned NFCats parser: the text after the last "###Score of the answer:", its first
    standalone digit 1-5."""
    found = NFCATS_SCORE.findall(str(text).split(nfcats_judge.MARKER)[-1].strip())
    if not found:
        raise UnparseableReply("expected a digit 1-5")
    return int(found[0])


async def score_nfcats(question, info, response, gateway) -> ItemScore:
    request = dataclasses.replace(
        nfcats_judge.judge_request(str(question.get("question", "")), response),
        max_parse_retries=2,  # 3 tries, as the reference's loop
    )
    reply = await gateway.chat(request, parse=parse_nfcats)
    raw = "\n---\n".join(reply.raw_replies or [reply.text])
    value = reply.parsed / 5 if reply.parse_ok else None
    return ItemScore(METRIC, value, raw, reply.parse_ok, "")


async def score_hellobench(question, info, response, gateway) -> ItemScore:
    judged = await checklist_judge.checklist_score(
        gateway, str(question.get("question", "")), response, info["checklist"]
    )
    return ItemScore(METRIC, judged.value, judged.raw_reply, judged.parse_ok,
                     judged.prompt_version)  # fmt: skip


async def score_writingbench(question, info, response, gateway) -> ItemScore:
    judged = await writingbench_critic.critic_score(
        gateway, str(question.get("question", "")), response, info["criteria"]
    )
    if not judged.parse_ok:  # the reference's EvalAgent raises "Fail to generate score!"
        raise JudgeFailed(
            f"scoring: judge: record {_ident(question)}: the WritingBench critic gave no "
            "parseable score (the reference stops a WritingBench run here too)"
        )
    return ItemScore(METRIC, judged.value / 10, judged.raw_reply, True, judged.prompt_version)


# ---- the item-metric interface ------------------------------------------------------------------
#
# Each family (``eval/memorybench/memorybench_families.py``) states its judge call
# (``judge_score``), the ``info`` fields it reads and its failure value beside its paper metric;
# this interface finds it.


def metric_of(dataset: str) -> tuple[str, bool]:
    """(``llm_judge_score``, whether mnemoflow computes it for ``dataset``: always)."""
    family_of(dataset)
    return METRIC, True


def check_supported(datasets: Iterable[str]) -> None:
    """One-line ConfigError for a dataset that is not MemoryBench's (naming the families)."""
    for dataset in datasets:
        family_of(dataset)


def is_judged(dataset: str) -> bool:
    """Every dataset's value comes from a judge that can fail (DialSim's only past an exact
    match): the two denominators can differ everywhere."""
    family_of(dataset)
    return True


async def evaluate_item_all(question: Mapping[str, Any], response: str, gateway, **_: Any):
    """The item's ``llm_judge_score`` (one score: the protocol keeps no sub-metrics)."""
    dataset = str(question["dataset"])
    family = family_for(dataset)
    info = item_info(question)
    family.check_judged(info, _ident(question))
    response = "" if response is None else str(response)
    item = Item(question, str(question.get("question", "")), info, response)
    return [await family.judge_score(item, gateway)]


async def evaluate_item(question: Mapping[str, Any], response: str, gateway, **options: Any):
    return (await evaluate_item_all(question, response, gateway, **options))[0]


def failure_value(dataset: str) -> float:
    """An unscored item's value in the ``:all`` rows: the family's ``judge_failure_value``."""
    return family_for(dataset).judge_failure_value


def item_value(dataset: str, scores: Any) -> float:
    """The per-item number normalization uses: ``llm_judge_score``; unscored -> the bottom of
    the scale (counted through ``parse_ok``)."""
    value = metric_value(dataset, scores, METRIC)
    if value is None:
        return failure_value(dataset)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value)


def provenance(gateway) -> dict[str, Any]:
    """``judge.json`` of a ``scoring: judge`` run: the upstream commit, the prompt version, the
    judge binding and where it differs from what ``llm_judge._call_api`` sends."""
    bound = gateway.describe()["judge"]
    differs = {
        key: {"reference": value, "bound": bound.get(key)}
        for key, value in REFERENCE_SAMPLING.items()
        if bound.get(key) != value
    }
    return {
        "scoring": "judge",
        "upstream": f"THUIR/MemoryBench@{texts.UPSTREAM_COMMIT}",
        "prompt_version": PROMPT_VERSION,
        "judge": {"model": bound.get("model"), "backend": bound.get("backend")},
        "reference_sampling": REFERENCE_SAMPLING,
        "matches_reference": not differs,
        "differs": differs,
    }
