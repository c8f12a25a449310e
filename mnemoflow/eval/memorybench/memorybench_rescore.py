"""Re-scoring stored MemoryBench predictions: the official predicts format -> item scores.

Predictions are JSONL (or one JSON list, as the reference's ``predict.json``) of
``{"dataset", "test_idx", "response"}``; ``dataset`` may be left out for a ``dataset:NAME`` set.
Every line must name an item of the loaded data, once. Scores are computed with
:func:`mnemoflow.eval.memorybench.memorybench_metrics.evaluate_item_all`, concurrently through the
gateway: one row per metric of an item (a multi-metric dataset's sub-metrics and fused score,
LimitGen's accuracy and rating), the row normalization uses marked ``primary``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.tables import MEMORYBENCH_ITEM_SCORES
from mnemoflow.data.validate import DataError
from mnemoflow.eval.memorybench import memorybench_metrics


def read_records(path: str | Path) -> list[tuple[str, Any]]:
    """(location, parsed record) of a JSONL file, or of a file holding one JSON list."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{path}: file does not exist") from exc
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON: {exc}") from exc
        return [(f"{path}: record {i}", item) for i, item in enumerate(items)]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}: line {number}", json.loads(line)))
        except ValueError as exc:
            raise DataError(f"{path}: line {number}: not valid JSON: {exc}") from exc
    return out


def keyed_records(
    path: str | Path, value_field: str, datasets: list[str], single: str | None = None
) -> pd.DataFrame:
    """dataset, test_idx, <value_field>, where: every record checked, keys unique.

    ``single``: the dataset of a ``dataset:NAME`` set, used where a record names none.
    """
    rows, seen = [], {}
    for loc, record in read_records(path):
        if not isinstance(record, dict):
            raise DataError(f"{loc}: expected an object with dataset, test_idx, {value_field}")
        dataset = record.get("dataset") or single
        if dataset is None:
            raise DataError(f"{loc}: missing field 'dataset'")
        if dataset not in datasets:
            raise DataError(f"{loc}: field 'dataset': {dataset!r} is not in the set")
        test_idx = record.get("test_idx")
        if test_idx is None:
            raise DataError(f"{loc} ({dataset}): missing field 'test_idx'")
        if isinstance(test_idx, bool) or not isinstance(test_idx, int):
            raise DataError(f"{loc} ({dataset}): field 'test_idx' must be an integer")
        if value_field not in record:
            raise DataError(f"{loc} ({dataset}:{test_idx}): missing field '{value_field}'")
        key = (dataset, test_idx)
        if key in seen:
            raise DataError(f"{loc}: ({dataset}, {test_idx}) repeats {seen[key]}")
        seen[key] = loc
        rows.append({"dataset": dataset, "test_idx": test_idx, value_field: record[value_field]})
    if not rows:
        raise DataError(f"{path}: no records")
    return pd.DataFrame(rows)


def text_responses(path: str | Path, predictions: pd.DataFrame) -> pd.DataFrame:
    """``predictions`` (:func:`keyed_records` of ``response``) when every response is text; else
    one line naming the file and the first record's (dataset, test_idx)."""
    bad = predictions[~predictions["response"].map(lambda r: isinstance(r, str))]
    if not bad.empty:
        first = bad.iloc[0]
        raise DataError(f"{path}: ({first['dataset']}, {first['test_idx']}): 'response' not text")
    return predictions


def read_predictions(
    path: str | Path, questions: pd.DataFrame, datasets: list[str], single: str | None
) -> pd.DataFrame:
    """The predictions joined to their questions (every one must be an item of the data)."""
    predictions = text_responses(path, keyed_records(path, "response", datasets, single))
    keys = questions.assign(test_idx=questions["question_id"].str.rsplit(":", n=1).str[1])
    keys["test_idx"] = keys["test_idx"].astype(int)
    joined = predictions.merge(keys, on=["dataset", "test_idx"], how="left", indicator=True)
    unknown = joined[joined["_merge"] == "left_only"]
    if not unknown.empty:
        first = unknown.iloc[0]
        raise DataError(
            f"{path}: ({first['dataset']}, {first['test_idx']}) is not an item of the data"
        )
    return joined.drop(columns="_merge")


async def score_predictions(
    joined: pd.DataFrame, gateway, fusion=None, bertscore=None, metrics: Any = None
) -> pd.DataFrame:
    """question_scores rows (``MEMORYBENCH_ITEM_SCORES``) for predictions joined to their
    questions: every metric of every item; the ``primary`` row's value is :func:`item_value`
    (failures mapped).
    ``metrics``: the scoring protocol's item metrics (default: the paper's,
    :mod:`mnemoflow.eval.memorybench.memorybench_metrics`; ``scoring: judge``'s is
    :mod:`mnemoflow.eval.memorybench.memorybench_judge_protocol`)."""
    m = metrics or memorybench_metrics
    m.check_supported(sorted(set(joined["dataset"])))
    records = joined.to_dict("records")
    scored = await asyncio.gather(
        *(
            m.evaluate_item_all(r, r["response"], gateway, fusion=fusion, bertscore=bertscore)
            for r in records
        )
    )
    rows = []
    for r, scores in zip(records, scored, strict=True):
        metric, _ = m.metric_of(r["dataset"])
        for s in scores:
            is_primary = s.metric == metric
            rows.append(
                {
                    "dataset": r["dataset"],
                    "test_idx": int(r["test_idx"]),
                    "metric": s.metric,
                    "value": m.item_value(r["dataset"], s) if is_primary else s.value,
                    "question_id": r["question_id"],
                    "parse_ok": s.parse_ok,
                    "raw_reply": s.raw_reply,
                    "primary": is_primary,
                    "prompt_version": s.prompt_version,
                }
            )
    return pd.DataFrame(rows, columns=MEMORYBENCH_ITEM_SCORES.names)


def primary_values(scores: pd.DataFrame) -> pd.DataFrame:
    """dataset, test_idx, value of the rows normalization uses."""
    return scores[scores["primary"]][["dataset", "test_idx", "value"]].reset_index(drop=True)


def dataset_means(scores: pd.DataFrame, set_name: str, metrics: Any = None) -> pd.DataFrame:
    """Per-dataset mean of each metric (``MEMORYBENCH_NORMALIZED`` rows: set, dataset, metric,
    value, n = items with a value: a sub-metric left None, e.g. JuDGE's time_score, is skipped)."""
    grouped = scores.groupby(["dataset", "metric"], sort=False)["value"].agg(["mean", "count"])
    rows = [
        {"set": set_name, "dataset": d, "metric": m, "value": float(mean), "n": int(count)}
        for (d, m), mean, count in zip(
            grouped.index, grouped["mean"], grouped["count"], strict=True
        )
    ]
    rows += denominator_rows(scores, set_name, metrics)
    return pd.DataFrame(rows, columns=["set", "dataset", "metric", "value", "n"])


def denominator_rows(
    scores: pd.DataFrame, set_name: str, metrics: Any = None
) -> list[dict[str, Any]]:
    """For each judged dataset (``is_judged``), its primary metric both ways:
    ``<metric>:scored`` over the items whose judge gave a value, ``<metric>:all`` over every
    item (a failed judge at the bottom of its scale, the primary row's value) and
    ``<metric>:unscored``, how many failed (``n`` = all items)."""
    rows = []
    primary = scores[scores["primary"].astype(bool)]
    for (dataset, metric), group in primary.groupby(["dataset", "metric"], sort=False):
        if not (metrics or memorybench_metrics).is_judged(dataset):
            continue
        ok = group["parse_ok"].astype(bool)
        base = {"set": set_name, "dataset": dataset}
        if ok.any():
            scored = group[ok]["value"]
            rows.append({**base, "metric": f"{metric}:scored", "value": float(scored.mean()),
                         "n": int(scored.count())})  # fmt: skip
        rows.append({**base, "metric": f"{metric}:all", "value": float(group["value"].mean()),
                     "n": len(group)})  # fmt: skip
        rows.append({**base, "metric": f"{metric}:unscored", "value": float((~ok).sum()),
                     "n": len(group)})  # fmt: skip
    return rows
