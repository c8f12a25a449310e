"""MemoryBench's normalized scores of a domain or task set, with the official statistics.

As the reference's ``summary_results`` computes them (docs/memorybench.md §4):

- one value per item (``item_value``), keyed by (dataset, test_idx); Locomo-0..9 are merged into
  one dataset "Locomo" after keying (their test_idx collide);
- per dataset, min-max ``(s - min) / (max - min)`` (0 when max <= min) and z ``(s - mu) / sigma``
  (0 when sigma <= 1e-6) with the statistics of THAT group in the official file
  (``final_evaluate_summary_wo_details.json``: ``{domain|task: {NAME: {summary: {dataset_min,
  dataset_max, dataset_mu, dataset_sigma}}}}``; a dataset's statistics differ between its domain
  and its task); no clipping;
- ``average`` = mean over datasets of the mean min-max value; ``weighted_average`` = sum of all
  min-max values / N items; ``z_score`` = sum of all z values / N.

Difference from the reference: by default every dataset of the set must have values (the
reference averages over whichever datasets are present, so a missing dataset silently changes
``average``); ``partial=True`` allows it and the result says which are missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.memorybench import parse_set, registry, select
from mnemoflow.data.tables import MEMORYBENCH_NORMALIZED
from mnemoflow.data.validate import DataError

SUMMARY_METRICS = ("average", "weighted_average", "z_score")
STAT_KEYS = ("dataset_min", "dataset_max", "dataset_mu", "dataset_sigma")


def merged_name(dataset: str) -> str:
    """The dataset a value is normalized under: Locomo-k -> "Locomo"."""
    return "Locomo" if dataset.startswith("Locomo") else dataset


def group_stats(stats_file: str | Path, kind: str, name: str) -> dict[str, dict[str, float]]:
    """``{merged dataset: {min, max, mu, sigma}}`` of one group of the official statistics file."""
    path = Path(stats_file)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{path}: statistics file does not exist") from exc
    except ValueError as exc:
        raise DataError(f"{path.name}: invalid JSON: {exc}") from exc
    summary = data.get(kind, {}).get(name, {}).get("summary") if isinstance(data, dict) else None
    if not isinstance(summary, dict):
        raise DataError(f"{path.name}: no statistics for {kind}:{name} ({kind}.{name}.summary)")
    out: dict[str, dict[str, float]] = {}
    for key in STAT_KEYS:
        table = summary.get(key)
        if not isinstance(table, dict):
            raise DataError(f"{path.name}: {kind}.{name}.summary: missing field '{key}'")
        for dataset, value in table.items():
            out.setdefault(dataset, {})[key.removeprefix("dataset_")] = float(value)
    return out


def normalize_values(
    values: pd.DataFrame, stats: dict[str, dict[str, float]], set_name: str
) -> pd.DataFrame:
    """Per-item ``minmax`` and ``z`` columns added to ``values`` (dataset, test_idx, value)."""
    frame = values.copy()
    frame["merged"] = frame["dataset"].map(merged_name)
    unknown = sorted(set(frame["merged"]) - set(stats))
    if unknown:
        raise DataError(f"statistics of {set_name}: no entry for dataset {unknown[0]!r}")
    low = frame["merged"].map(lambda d: stats[d]["min"])
    high = frame["merged"].map(lambda d: stats[d]["max"])
    mu = frame["merged"].map(lambda d: stats[d]["mu"])
    sigma = frame["merged"].map(lambda d: stats[d]["sigma"])
    span = high - low
    frame["minmax"] = ((frame["value"] - low) / span).where(span > 0, 0.0)
    frame["z"] = ((frame["value"] - mu) / sigma).where(sigma > 1e-6, 0.0)
    return frame


def normalize_set(
    values: pd.DataFrame,
    set_name: str,
    configs_dir: str | Path,
    stats_file: str | Path,
    partial: bool = False,
) -> pd.DataFrame:
    """The normalized summary of a ``domain:NAME`` / ``task:NAME`` set (rows of the schema
    ``MEMORYBENCH_NORMALIZED``).

    ``values``: columns dataset, test_idx, value (one final value per item).
    """
    ((kind, name),) = parse_set(set_name).items()
    if kind == "dataset":
        raise DataError(f"set {set_name}: normalization is defined for domain and task sets")
    members = [dataset for dataset, _ in select({kind: name}, registry(configs_dir))]
    missing_columns = [c for c in ("dataset", "test_idx", "value") if c not in values.columns]
    if missing_columns:
        raise DataError(f"values: missing column '{missing_columns[0]}'")
    strangers = sorted(set(values["dataset"]) - set(members))
    if strangers:
        raise DataError(f"values: dataset {strangers[0]!r} is not in {set_name}")
    repeated = values[values.duplicated(["dataset", "test_idx"])]
    if not repeated.empty:
        first = repeated.iloc[0]
        raise DataError(f"values: ({first['dataset']}, {first['test_idx']}) appears twice")
    blank = values[values["value"].isna()]
    if not blank.empty:
        first = blank.iloc[0]
        raise DataError(f"values: ({first['dataset']}, {first['test_idx']}) has no value (NaN)")
    absent = [d for d in members if d not in set(values["dataset"])]
    if absent and not partial:
        raise DataError(f"values: no value for dataset {absent[0]!r} of {set_name}")
    if values.empty:
        raise DataError(f"values: nothing to normalize for {set_name}")
    frame = normalize_values(values, group_stats(stats_file, kind, name), set_name)
    per_dataset = frame.groupby("merged", sort=False).agg(
        mean=("value", "mean"), minmax=("minmax", "mean"), z=("z", "mean"), n=("value", "size")
    )
    total = len(frame)
    summary = {
        "average": float(per_dataset["minmax"].mean()),
        "weighted_average": float(frame["minmax"].sum() / total),
        "z_score": float(frame["z"].sum() / total),
    }
    rows: list[dict[str, Any]] = [
        {"set": set_name, "dataset": "all", "metric": m, "value": v, "n": total}
        for m, v in summary.items()
    ]
    for dataset, row in per_dataset.iterrows():
        for metric in ("mean", "minmax", "z"):
            rows.append(
                {
                    "set": set_name,
                    "dataset": dataset,
                    "metric": metric,
                    "value": float(row[metric]),
                    "n": int(row["n"]),
                }
            )
    return pd.DataFrame(rows, columns=MEMORYBENCH_NORMALIZED.names)


def missing_datasets(values: pd.DataFrame, set_name: str, configs_dir: str | Path) -> list[str]:
    """Datasets of the set without any value (for a partial summary's note)."""
    members = [d for d, _ in select(parse_set(set_name), registry(configs_dir))]
    present = set(values["dataset"])
    return [d for d in members if d not in present]


def format_summary(normalized: pd.DataFrame) -> str:
    """The summary rows as aligned text lines (what the CLI prints)."""
    lines = []
    for row in normalized.to_dict("records"):
        if row["dataset"] == "all":
            lines.append(f"{row['set']}  {row['metric']:<17} {row['value']:.4f}  (n={row['n']})")
    return "\n".join(lines)
