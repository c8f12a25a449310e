"""MemoryBench's per-item metrics behind one entry point, for the workflow, the simulators and
``mnemoflow score``: each of the 28 dataset configurations scored as the reference scores it.

- :func:`evaluate_item_all` scores one response to one row of the ``questions`` table with ALL of
  the dataset's metrics (its ``test_metrics`` and, for JuDGE / IdeaBench / JRE-L, the one fused
  ``llm_as_judge_score``), a list of :class:`ItemScore`; :func:`evaluate_item` returns only the
  one normalization uses (the single-score callers' entry point).
- Dispatch (docs/metrics.md "Wiring"): Locomo-k ``f1``, DialSim ``accuracy``, LexEval ``rougel``,
  NFCats ``score``, WritingPrompts ``meteor``, HelloBench ``avg_score`` (checklist judge),
  WritingBench ``score`` (critic role), LimitGen-Syn ``accuracy`` + ``rating``, and the
  multi-metric datasets' sub-metrics + their fused score.
- The fusion call of a multi-metric item is asked once and kept in a :class:`FusionStore` (the
  reference re-asks at every summary, so its numbers drift): pass ``fusion=`` a store or a JSON
  path (one per scoring output); without one, a process-wide in-memory store is used.
- :func:`check_supported` fails early with one line for a dataset that is not MemoryBench's.
- :func:`item_value` turns an item's scores into the one number normalization uses, as the
  reference's ``summary_results`` does (fused score; LimitGen rating; else the dataset's first
  test metric; bool -> 1/0); a judge that never parsed gives the bottom of its scale, counted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.eval.checklist_judge import checklist_score
from mnemoflow.eval.dialsim_accuracy import dialsim_accuracy
from mnemoflow.eval.fusion import FusionStore, item_key
from mnemoflow.eval.ideabench import ideabench_score
from mnemoflow.eval.jrel import jrel_score
from mnemoflow.eval.judge_doc import judge_doc_score
from mnemoflow.eval.limitgen import ERROR_TYPES, limitgen_rating
from mnemoflow.eval.memorybench_locomo_f1 import memorybench_locomo_f1, options_of
from mnemoflow.eval.meteor import meteor
from mnemoflow.eval.nfcats_judge import FAILURE_SCORE, nfcats_score
from mnemoflow.eval.rouge_l_zh import rouge_l_zh
from mnemoflow.eval.writingbench_critic import critic_score


@dataclass
class ItemScore:
    """One metric of one item: ``value`` None only when the metric could not be computed;
    ``raw_reply`` the judge's replies ("" for model-free metrics); ``parse_ok`` false when the
    judge's reply never parsed (then ``value`` is None or the metric's failure value);
    ``prompt_version`` the judge prompt that produced it ("" for model-free metrics)."""

    metric: str
    value: float | None
    raw_reply: str = ""
    parse_ok: bool = True
    prompt_version: str = ""


FUSED = "llm_as_judge_score"
#: Dataset family (name prefix) -> the per-item value normalization uses.
_FAMILIES: list[tuple[str, str]] = [
    ("Locomo", "f1"),
    ("DialSim", "accuracy"),
    ("LexEval", "rougel"),
    ("NFCats", "score"),
    ("WritingPrompts", "meteor"),
    ("HelloBench", "avg_score"),
    ("WritingBench", "score"),
    ("JuDGE", FUSED),
    ("IdeaBench", FUSED),
    ("JRE-L", FUSED),
    ("LimitGen", "rating"),
]
#: The reference's ``test_metrics`` of the multi-metric families (each.json), in its order.
SUB_METRICS: dict[str, tuple[str, ...]] = {
    "JuDGE": (
        "reasoning_meteor",
        "judge_meteor",
        "reasoning_bert_score",
        "judge_bert_score",
        "crime_recall",
        "crime_precision",
        "crime_f1",
        "penalcode_index_recall",
        "penalcode_index_precision",
        "penalcode_index_f1",
        "time_score",
        "amount_score",
    ),
    "IdeaBench": (
        "bert_score",
        "llm_rating_score",
        "llm_novelty_ranking_score",
        "llm_feasibility_ranking_score",
    ),
    "JRE-L": ("Rouge-L", "BERTScore-F1", "CLI", "FKGL", "DCRS"),
}
#: The ``info`` fields each family's metric reads (a record without one fails with one line).
REQUIRED_INFO: dict[str, tuple[str, ...]] = {
    "Locomo": ("golden_answer", "category"),
    "DialSim": ("golden_answer",),
    "LexEval": ("golden_answer",),
    "NFCats": (),
    "WritingPrompts": ("golden_answer",),
    "HelloBench": ("checklist",),
    "WritingBench": ("criteria",),
    "JuDGE": ("golden_answer",),
    "IdeaBench": ("abstract",),
    "JRE-L": ("pr-abstract",),
    "LimitGen": ("category", "ground_truth"),
}
#: What an item's normalization value is when its judge never gave a parseable reply: the bottom
#: of the metric's scale (counted through ``parse_ok``; the reference's 0 is below the 1-10 and
#: 1-5 scales).
FAILURE_VALUES = {
    "accuracy": 0.0,
    "score": FAILURE_SCORE,
    "avg_score": 0.0,
    "rating": 0.0,
    FUSED: 1.0,
}


def family_of(dataset: str) -> str:
    """The dataset's family (``Locomo``, ``HelloBench``, ...); ConfigError for a stranger."""
    for prefix, _ in _FAMILIES:
        if dataset.startswith(prefix):
            return prefix
    raise ConfigError(f"memorybench: dataset {dataset!r} is not a MemoryBench dataset")


def metric_of(dataset: str) -> tuple[str, bool]:
    """(the metric whose value normalization uses, whether mnemoflow computes it: always)."""
    family = family_of(dataset)
    return dict(_FAMILIES)[family], True


def check_supported(datasets: Iterable[str]) -> None:
    """Raise a one-line ConfigError for the first dataset that is not a MemoryBench one."""
    for dataset in datasets:
        metric_of(dataset)


def _meta(question: Mapping[str, Any]) -> dict[str, Any]:
    meta = question.get("meta")
    if isinstance(meta, str):
        meta = json.loads(meta) if meta else {}
    return meta if isinstance(meta, dict) else {}


def _info(question: Mapping[str, Any]) -> dict[str, Any]:
    info = _meta(question).get("info")
    if not isinstance(info, dict):
        ident = question.get("question_id", question.get("dataset"))
        raise DataError(f"questions: record {ident}: missing field 'info' in meta")
    return info


def _test_idx(question: Mapping[str, Any]) -> Any:
    """The item's test_idx (the fusion store's key): meta, else the question_id's tail."""
    meta = _meta(question)
    if "test_idx" in meta:
        return meta["test_idx"]
    return str(question.get("question_id", "")).rsplit(":", 1)[-1]


def _check_info(family: str, info: dict[str, Any], ident: Any) -> None:
    for name in REQUIRED_INFO[family]:
        if name not in info:
            raise DataError(f"questions: record {ident}: missing field 'info.{name}'")
    if family == "HelloBench" and not (isinstance(info["checklist"], list) and info["checklist"]):
        raise DataError(f"questions: record {ident}: field 'info.checklist': not a non-empty list")
    if family == "Locomo":
        _check_locomo(info, ident)
    if family == "LimitGen":
        if info["category"] not in ERROR_TYPES:
            raise DataError(
                f"questions: record {ident}: field 'info.category': {info['category']!r} is not "
                f"one of {sorted(ERROR_TYPES)}"
            )


def _locomo_category(info: dict[str, Any]) -> int | None:
    """``info.category`` as an int 1-5 (the release's int, or its digit text), else None."""
    category = info["category"]
    if isinstance(category, str) and category.strip().isdigit():
        category = int(category)
    if isinstance(category, bool) or not isinstance(category, int) or not 1 <= category <= 5:
        return None
    return category


def _check_locomo(info: dict[str, Any], ident: Any) -> None:
    category = _locomo_category(info)
    if category is None:
        raise DataError(
            f"questions: record {ident}: field 'info.category': {info['category']!r} is not one "
            "of 1-5"
        )
    if category == 5:
        try:
            options_of(info["golden_answer"])
        except ValueError:
            raise DataError(
                f"questions: record {ident}: field 'info.golden_answer': a category-5 gold must "
                'be the options object {"a": ..., "b": ...} (or its JSON text)'
            ) from None


#: Stores by file, so every call naming the same file shares one in-memory copy (two copies of
#: one file would overwrite each other's records); ``None`` -> the process-wide store.
_STORES: dict[str | None, FusionStore] = {}


def fusion_store(fusion: FusionStore | str | Path | None = None) -> FusionStore:
    """The :class:`~mnemoflow.eval.fusion.FusionStore` for ``fusion``: a store, a JSON path, or
    None (one in-memory store per process: asked once per process, not across runs)."""
    if isinstance(fusion, FusionStore):
        return fusion
    key = None if fusion is None else str(Path(fusion).expanduser().resolve())
    if key not in _STORES:
        _STORES[key] = FusionStore(key)
    return _STORES[key]


def _bertscore_model(bertscore: Any, family: str):
    """``bertscore``: None (bundled MiniLM), one BertScoreModel, or {family: BertScoreModel}."""
    if isinstance(bertscore, Mapping):
        return bertscore.get(family)
    return bertscore


def _number_or_none(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value)


def _from_judged(judged) -> ItemScore:
    return ItemScore(
        judged.metric,
        _number_or_none(judged.value),
        judged.raw_reply,
        judged.parse_ok,
        judged.prompt_version,
    )


def _fused_scores(family: str, judged) -> list[ItemScore]:
    """The sub-metrics (as computed, stored in the fused score's details) then the fused score."""
    details = judged.details or {}
    subs = details.get("sub_metrics", {})
    failures = set(details.get("sub_parse_failures", []))
    raw = details.get("sub_raw_replies", {})
    raw_of = {
        "llm_rating_score": raw.get("overlap"),
        "llm_novelty_ranking_score": raw.get("novelty"),
        "llm_feasibility_ranking_score": raw.get("feasibility"),
    }
    out = []
    for name in SUB_METRICS[family]:
        replies = raw_of.get(name)
        out.append(
            ItemScore(
                name,
                _number_or_none(subs.get(name)),
                json.dumps(replies, ensure_ascii=False) if replies else "",
                name not in failures,
                judged.prompt_version if replies else "",
            )
        )
    return [*out, _from_judged(judged)]


async def evaluate_item_all(
    question: Mapping[str, Any],
    response: str,
    gateway,
    *,
    fusion: Any = None,
    bertscore: Any = None,
) -> list[ItemScore]:
    """Every metric of ``response`` to ``question`` (a row of the ``questions`` table, as a dict).

    ``fusion``: where the fused scores of JuDGE / IdeaBench / JRE-L are kept (a FusionStore or a
    JSON path; see :func:`fusion_store`); ``bertscore``: the BERTScore model (None: the bundled
    MiniLM, not the reference's; a BertScoreModel; or one per family ``{"JuDGE": ...}``).
    """
    dataset = str(question["dataset"])
    family = family_of(dataset)
    metric = dict(_FAMILIES)[family]
    info = _info(question)
    response = "" if response is None else str(response)
    ident = question.get("question_id", dataset)
    _check_info(family, info, ident)
    prompt = str(question.get("question", ""))
    if family == "Locomo":
        category = _locomo_category(info)
        value = memorybench_locomo_f1(response, info["golden_answer"], category)
        return [ItemScore(metric, float(value))]
    if family == "LexEval":
        return [ItemScore(metric, rouge_l_zh(response, str(info["golden_answer"])))]
    if family == "DialSim":
        gold = str(info["golden_answer"])
        value, raw, ok = await dialsim_accuracy(prompt, gold, response, gateway)
        return [ItemScore(metric, value, raw, ok)]
    if family == "NFCats":
        value, raw, ok = await nfcats_score(prompt, response, gateway)
        return [ItemScore(metric, value, raw, ok)]
    if family == "WritingPrompts":
        # CPU-bound (WordNet lookups): off the event loop, so other items keep calling
        value = await asyncio.to_thread(meteor, str(info["golden_answer"]), response)
        return [ItemScore(metric, value)]
    if family == "HelloBench":
        judged = await checklist_score(gateway, prompt, response, info["checklist"])
        return [_from_judged(judged)]
    if family == "WritingBench":
        judged = await critic_score(gateway, prompt, response, info["criteria"])
        return [_from_judged(judged)]
    if family == "LimitGen":
        judged = await limitgen_rating(gateway, response, info)
        accuracy = judged.details.get("accuracy")
        return [
            ItemScore(
                "accuracy",
                _number_or_none(accuracy),
                "",
                judged.parse_ok,
                judged.prompt_version,
            ),
            _from_judged(judged),
        ]
    judged = await _fused(family, question, prompt, response, info, gateway, fusion, bertscore)
    return _fused_scores(family, judged)


#: Fusions being asked right now, by (store, item key): a second caller for the same item waits
#: for the first one's answer instead of asking again.
_IN_FLIGHT: dict[tuple[int, str], asyncio.Future] = {}


async def _fused(family, question, prompt, response, info, gateway, fusion, bertscore):
    """The fused score of a JuDGE / IdeaBench / JRE-L item: stored, or computed and stored."""
    score = {"JuDGE": judge_doc_score, "IdeaBench": ideabench_score, "JRE-L": jrel_score}[family]
    store = fusion_store(fusion)
    test_idx = _test_idx(question)
    slot = (id(store), item_key(family, test_idx, response))
    task = _IN_FLIGHT.get(slot)
    if task is None:
        model = _bertscore_model(bertscore, family)
        task = asyncio.ensure_future(score(gateway, test_idx, prompt, response, info, store, model))
        _IN_FLIGHT[slot] = task
        task.add_done_callback(lambda _: _IN_FLIGHT.pop(slot, None))
    return await asyncio.shield(task)


def primary(dataset: str, scores: Iterable[ItemScore]) -> ItemScore:
    """The score among ``scores`` whose value normalization uses."""
    metric, _ = metric_of(dataset)
    for score in scores:
        if score.metric == metric:
            return score
    raise ValueError(f"{dataset}: no score of metric {metric!r}")


async def evaluate_item(
    question: Mapping[str, Any],
    response: str,
    gateway,
    *,
    fusion: Any = None,
    bertscore: Any = None,
) -> ItemScore:
    """The one score of ``response`` normalization uses (see :func:`evaluate_item_all`)."""
    scores = await evaluate_item_all(
        question, response, gateway, fusion=fusion, bertscore=bertscore
    )
    return primary(str(question["dataset"]), scores)


def _number(metric: str, value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if value is None:
        if metric in FAILURE_VALUES:
            return FAILURE_VALUES[metric]
        raise ValueError(f"metric {metric!r} has no value")
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"metric {metric!r}: {value!r} is not a number")


def item_value(dataset: str, scores: ItemScore | Iterable[ItemScore] | Mapping[str, Any]) -> float:
    """The one per-item number normalization uses (the reference's rule, bool -> 1/0).

    ``scores``: an :class:`ItemScore`, the list :func:`evaluate_item_all` returns, or a
    ``{metric: value}`` mapping (the reference's ``metrics`` of an item). The value of the
    dataset's metric is taken: ``llm_as_judge_score`` for JuDGE / IdeaBench / JRE-L, ``rating``
    for LimitGen-Syn, else the first test metric; a judge that never parsed gives
    :data:`FAILURE_VALUES`.
    """
    metric, _ = metric_of(dataset)
    if isinstance(scores, ItemScore):
        scores = [scores]
    if not isinstance(scores, Mapping):
        scores = {s.metric: s.value for s in scores}
    if metric not in scores:
        raise ValueError(f"{dataset}: no value of metric {metric!r} in {sorted(scores)}")
    return _number(metric, scores[metric])
