"""MemoryBench's per-item metrics behind one entry point, for the workflow, the simulators and
``mnemoflow score``.

- :func:`evaluate_item` scores one response to one row of the ``questions`` table with the
  dataset's own metric (Locomo-k ``f1``, DialSim ``accuracy``, LexEval ``rougel``, NFCats
  ``score``); judged metrics call the ``judge`` role through the gateway and keep its raw reply.
- :func:`check_supported` fails early, with one line, for a set that holds a dataset whose metric
  is not built yet (METEOR, HelloBench checklist, WritingBench critic, the fused JuDGE / IdeaBench /
  JRE-L scores, LimitGen rating): never a silent 0.
- :func:`item_value` turns an item's scores into the one number normalization uses, as the
  reference's ``summary_results`` does (the dataset's first test metric; fused score; LimitGen
  rating; bool -> 1/0).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.eval.dialsim_accuracy import dialsim_accuracy
from mnemoflow.eval.memorybench_locomo_f1 import memorybench_locomo_f1
from mnemoflow.eval.nfcats_judge import FAILURE_SCORE, nfcats_score
from mnemoflow.eval.rouge_l_zh import rouge_l_zh


@dataclass
class ItemScore:
    """One metric of one item: ``value`` None only when the metric could not be computed;
    ``raw_reply`` the judge's replies ("" for model-free metrics); ``parse_ok`` false when the
    judge's reply never parsed (then ``value`` is the metric's failure value)."""

    metric: str
    value: float | None
    raw_reply: str = ""
    parse_ok: bool = True


#: Dataset family (name prefix) -> the per-item value normalization uses, and whether it is built.
_FAMILIES: list[tuple[str, str, bool]] = [
    ("Locomo", "f1", True),
    ("DialSim", "accuracy", True),
    ("LexEval", "rougel", True),
    ("NFCats", "score", True),
    ("WritingPrompts", "meteor", False),
    ("HelloBench", "avg_score", False),
    ("WritingBench", "score (WritingBench critic)", False),
    ("JuDGE", "fused score (JuDGE)", False),
    ("IdeaBench", "fused score (IdeaBench)", False),
    ("JRE-L", "fused score (JRE-L)", False),
    ("LimitGen", "rating", False),
]
#: What an item scores when its judge never gave a parseable reply (counted, never silent).
FAILURE_VALUES = {"accuracy": 0.0, "score": FAILURE_SCORE}


def metric_of(dataset: str) -> tuple[str, bool]:
    """(the metric whose value normalization uses, whether mnemoflow computes it yet)."""
    for prefix, metric, built in _FAMILIES:
        if dataset.startswith(prefix):
            return metric, built
    raise ConfigError(f"memorybench: dataset {dataset!r} is not a MemoryBench dataset")


def check_supported(datasets: Iterable[str]) -> None:
    """Raise a one-line ConfigError for the first dataset whose metric is not built yet."""
    for dataset in datasets:
        metric, built = metric_of(dataset)
        if not built:
            raise ConfigError(
                f"memorybench: dataset {dataset!r} needs metric '{metric}', which mnemoflow "
                "does not compute yet; choose a set of Locomo-k, DialSim-*, LexEval-* and NFCats"
            )


def _info(question: Mapping[str, Any]) -> dict[str, Any]:
    meta = question.get("meta")
    if isinstance(meta, str):
        meta = json.loads(meta) if meta else {}
    info = meta.get("info") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        ident = question.get("question_id", question.get("dataset"))
        raise DataError(f"questions: record {ident}: missing field 'info' in meta")
    return info


async def evaluate_item(question: Mapping[str, Any], response: str, gateway) -> ItemScore:
    """Score ``response`` to ``question`` (a row of the ``questions`` table, as a dict)."""
    dataset = str(question["dataset"])
    metric, built = metric_of(dataset)
    if not built:
        check_supported([dataset])
    info = _info(question)
    response = "" if response is None else str(response)
    ident = question.get("question_id", dataset)
    if metric != "score" and "golden_answer" not in info:
        raise DataError(f"questions: record {ident}: missing field 'info.golden_answer'")
    if metric == "f1":
        if "category" not in info:
            raise DataError(f"questions: record {ident}: missing field 'info.category'")
        value = memorybench_locomo_f1(response, info["golden_answer"], int(info["category"]))
        return ItemScore(metric, float(value))
    if metric == "rougel":
        return ItemScore(metric, rouge_l_zh(response, str(info["golden_answer"])))
    if metric == "accuracy":
        gold = str(info["golden_answer"])
        value, raw, ok = await dialsim_accuracy(str(question["question"]), gold, response, gateway)
        return ItemScore(metric, value, raw, ok)
    value, raw, ok = await nfcats_score(str(question["question"]), response, gateway)
    return ItemScore(metric, value, raw, ok)


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

    ``scores``: an :class:`ItemScore`, several of them, or a ``{metric: value}`` mapping (the
    reference's ``metrics`` of an item). The value of the dataset's metric is taken; a fused or
    LimitGen dataset raises (its metric is not built yet).
    """
    metric, built = metric_of(dataset)
    if not built:
        check_supported([dataset])
    if isinstance(scores, ItemScore):
        scores = [scores]
    if not isinstance(scores, Mapping):
        scores = {s.metric: s.value for s in scores}
    if metric not in scores:
        raise ValueError(f"{dataset}: no value of metric {metric!r} in {sorted(scores)}")
    return _number(metric, scores[metric])
