"""Scores across seeds (``repeats: N``): each metric's mean and standard deviation over the repeats.

A run repeated with N seeds (mnemoflow/repeats.py) has N summaries with the same run keys. The
per-question interval of one seed's score says how much the score would move with other questions;
the spread across seeds says how much it moves when the simulated users, the assistant and the
memory writer sample again. The report shows both, side by side.

The summary keeps repeat 0's rows as they are (so a run without repeats is summarized as it always
was) and adds, per (benchmark, system, protocol, step, metric, aggregate) of the repeats, the rows
``seeds_mean:<aggregate>`` and ``seeds_sd:<aggregate>`` whose ``n`` is the number of seeds with a
value there (not a number of questions). The sd is the sample standard deviation (ddof 1; NaN
with one seed). The interval bounds (``ci95_low`` / ``ci95_high``) are not averaged: a mean of
bounds is no interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from mnemoflow.data.tables import SUMMARY

MEAN = "seeds_mean"
SD = "seeds_sd"
#: Aggregates that are interval bounds of one seed's score, not scores.
_BOUNDS = ("ci95_low", "ci95_high")
_RUN = ["benchmark", "system", "protocol"]
_KEYS = [*_RUN, "step", "metric", "aggregate"]


def across_seeds(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """Summary rows (SUMMARY's columns) of the mean and sd across ``runs``, one summary per seed.

    Fewer than two runs: no rows (a run without repeats has no spread to show).
    """
    runs = [run for run in runs if not run.empty]
    if len(runs) < 2:
        return pd.DataFrame(columns=SUMMARY.names)
    rows = pd.concat([run[[*_KEYS, "value"]] for run in runs], ignore_index=True)
    rows = rows[~rows["aggregate"].isin(_BOUNDS) & ~rows["aggregate"].str.startswith("seeds_")]
    stats = (
        rows.groupby(_KEYS, sort=True, dropna=False)["value"]
        .agg(mean="mean", sd="std", n="count")  # pandas' std: ddof 1, NaN for one value
        .reset_index()
    )
    out = []
    for name, column in ((MEAN, "mean"), (SD, "sd")):
        part = stats[_KEYS].copy()
        part["aggregate"] = name + ":" + stats["aggregate"]
        part["value"] = stats[column].astype(float)
        part["n"] = stats["n"].astype(int)
        out.append(part)
    return pd.concat(out, ignore_index=True)[SUMMARY.names]


def has_seeds(summary: pd.DataFrame) -> bool:
    return not summary.empty and summary["aggregate"].str.startswith(MEAN + ":").any()


def seed_texts(rows: pd.DataFrame, metric: str, aggregate: str) -> dict[str, str]:
    """``label`` -> "mean ± sd (n seeds)" of ``metric`` / ``aggregate`` (rows have ``label``)."""
    mine = rows[rows["metric"] == metric]
    mean = mine[mine["aggregate"] == f"{MEAN}:{aggregate}"].set_index("label")
    sd = mine[mine["aggregate"] == f"{SD}:{aggregate}"].set_index("label")["value"]
    return {
        label: seed_text(row.value, sd.get(label, math.nan), int(row.n))
        for label, row in mean.iterrows()
    }


def seed_text(mean: float, sd: float, n: int) -> str:
    """``0.512 ± 0.020 (3 seeds)``; the sd is "–" where it is undefined (one seed)."""
    if pd.isna(mean):
        return "–"
    spread = "–" if pd.isna(sd) else f"{sd:.3f}"
    return f"{mean:.3f} ± {spread} ({n} seeds)"


#: The aggregates the across-seeds table shows: the per-question mean, AMemGym's mean over
#: periods, MemoryBench's normalized score.
SHOWN = ("micro", "mean_over_periods", "normalized")


def seeds_table(summary: pd.DataFrame, shown: Callable[[str], bool]) -> pd.DataFrame:
    """One row per run, metric (those ``shown`` keeps) and aggregate at the run's last step: the
    base seed's value, its per-question 95 % interval where the summary has one (the score rule's
    ``ci95_low`` / ``ci95_high`` rows), and the mean ± sd across seeds. Empty without repeats."""
    if not has_seeds(summary):
        return pd.DataFrame()
    last = summary[summary["step"] == summary.groupby(_RUN)["step"].transform("max")]
    value = {tuple(r[k] for k in _KEYS): r["value"] for r in last.to_dict("records")}
    rows = []
    means = last[last["aggregate"].str.startswith(MEAN + ":") & last["metric"].map(shown)]
    for r in means.sort_values(_KEYS, kind="stable").to_dict("records"):
        aggregate = r["aggregate"].removeprefix(MEAN + ":")
        if aggregate not in SHOWN:
            continue
        key = (r["benchmark"], r["system"], r["protocol"], r["step"], r["metric"])
        low, high = value.get((*key, "ci95_low")), value.get((*key, "ci95_high"))
        ci = f"[{low:.3f}, {high:.3f}]" if aggregate == "micro" and low is not None else "–"
        rows.append(
            {
                "benchmark": r["benchmark"],
                "system": r["system"],
                "protocol": r["protocol"],
                "metric": r["metric"] if aggregate == "micro" else f"{r['metric']} ({aggregate})",
                "base seed": value.get((*key, aggregate), math.nan),
                "95 % CI (questions)": ci,
                "mean ± sd across seeds": seed_text(
                    r["value"], value.get((*key, f"{SD}:{aggregate}"), math.nan), int(r["n"])
                ),
            }
        )
    return pd.DataFrame(rows)
