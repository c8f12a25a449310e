"""A run against the published numbers, or against another run: one mechanism.

- :func:`compare_published`: for every published cell (``mnemoflow.data.published``) our value
  with its 95 % interval, the published value, the difference (ours - published) and a flag where
  the published value lies outside our interval (for a published ``rank_change``, our own on- to
  off-policy rank change); per table, Kendall's τ between the paper's ranking of the rows and
  ours, and each row's rank change marked as the AMemGym paper marks its on- vs off-policy table
  (``▲k``: we rank it k places higher than the paper).
- :func:`compare_runs`: every summary row two runs share, B's value against A's interval, the
  paired test where both runs scored the same items, and τ per (benchmark, protocol, metric).
- :func:`paired_systems`: between the systems of one run on the same items, whether a
  difference is more than noise (McNemar for right / wrong, else the paired bootstrap).

Our values come from ``summary.parquet``; the per-item values behind them (for intervals and
paired tests) from every ``question_scores.parquet`` under the results folder: the unified
QUESTION_SCORES rows (level ``answer``), and AMemGym's per-question rows, whose run keys are the
path ``{benchmark}/{system}/{protocol}/step{k}`` (a run's repeats with other seeds, under
``seed{S}/``, are left out: their spread is in the summary). An interval is used only when the items
reproduce the summary value (same mean within 1e-6, same n); otherwise the proportion's Wilson
interval out of n (``wilson-n``), else none. AMemGym items are clustered by user (a user's
questions, and a user's periods, are not independent), so their interval is a bootstrap over
users (``cluster-bootstrap``); so is AMemGym's memory score, a score normalized between the
random and the upper-bound accuracy (:data:`NORMALIZED`), which is never given a proportion's
Wilson interval even when every user's score is 0 or 1. An interval of zero width (every cluster,
or every item, scores alike: the resampled means cannot vary) is no interval: it is marked
``degenerate``, without bounds, and no published cell is called outside it.

Paired tests take the clustering into account: items that share a cluster (AMemGym's users,
whose questions come back every period) are tested with a sign-flip permutation test over
clusters (``cluster-permutation``), independent items with McNemar (right / wrong) or the paired
bootstrap; ``p_holm`` is the Holm-adjusted p-value over the pairs compared on one metric
(:data:`HOLM_FAMILY`), and ``significant`` says whether it is below :data:`ALPHA`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from mnemoflow.data.published import MEAN, RANK_CHANGE
from mnemoflow.data.tables import FOOTPRINT_METRICS, QUESTION_SCORES, TableError, read_table
from mnemoflow.layout import RUN_FOLDER, parse
from mnemoflow.report.seeds import MEAN as SEEDS_MEAN
from mnemoflow.report.seeds import SD as SEEDS_SD
from mnemoflow.report.seeds import has_seeds
from mnemoflow.report.significance import (
    cluster_paired_test,
    holm,
    kendall_tau,
    paired_test,
    rank_marks,
)
from mnemoflow.report.significance import ranks as rank_of
from mnemoflow.report.stats import mean_interval, wilson_interval
from mnemoflow.report.summaries import ReportError, is_proportion, lower_is_better

RUN = ["benchmark", "system", "protocol", "step"]
#: The aggregate of an AMemGym summary row that is the mean over periods 0..step.
MEAN_OVER_PERIODS = "mean_over_periods"
#: The aggregate a published ``mean`` cell is compared with, the first the run has: AMemGym's
#: mean over periods, a static benchmark's micro score, a MemoryBench set's normalized summary.
MEAN_AGGREGATES = (MEAN_OVER_PERIODS, "micro", "normalized")
#: Aggregates a paired test is run for (a per-item sample stands behind them).
TESTED = ("micro", MEAN_OVER_PERIODS)
_TOLERANCE = 1e-6
#: ``results/seed{S}/``: repeat k's mirror of the run (``repeats:``, mnemoflow/repeats.py).
_REPEAT_DIR = re.compile(r"^seed\d+$")
#: AMemGym baselines that are shares of questions like accuracy.
_BASELINES = ("random", "upper_bound")
#: Scores normalized between two baselines (AMemGym's memory score: (accuracy - random) /
#: (upper bound - random)): not proportions, so never a Wilson interval.
NORMALIZED = ("memory_score",)
#: An interval that cannot be drawn: every cluster (or item) scores alike.
DEGENERATE = "degenerate"


@dataclass
class Run:
    """One results folder: its summary and the per-item values behind it."""

    root: Path
    summary: pd.DataFrame
    items: pd.DataFrame  # RUN keys, metric, item, cluster, value


ITEM_COLUMNS = [*RUN, "metric", "item", "cluster", "value"]


def _amemgym_items(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """Accuracy per question and memory score per (user, period) from AMemGym's rows."""
    frame = frame.assign(user_id=frame["user_id"].astype(str))
    item = frame["user_id"] + "/" + frame["period"].astype(str) + "/" + frame["question_id"]
    parts = [
        pd.DataFrame(
            {
                "metric": "accuracy",
                "item": item,
                "cluster": frame["user_id"],
                "value": frame["correct"],
            }
        )
    ]
    if frame["upper_bound"].notna().any():
        per = frame.groupby(["user_id", "period"], sort=True)[
            ["correct", "random", "upper_bound"]
        ].mean()
        gap = per["upper_bound"] - per["random"]
        score = ((per["correct"] - per["random"]) / gap).where(gap.abs() > 1e-12)
        per = score.rename("value").reset_index()
        parts.append(
            pd.DataFrame(
                {
                    "metric": "memory_score",
                    "item": per["user_id"] + "/" + per["period"].astype(str),
                    "cluster": per["user_id"],
                    "value": per["value"],
                }
            )
        )
    out = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    for name, value in keys.items():
        out[name] = value
    return out[ITEM_COLUMNS]


def _keys_from_path(path: Path, root: Path) -> dict | None:
    relative = path.relative_to(root)
    keys = parse(relative.as_posix()) if len(relative.parts) == 5 else None
    return None if keys is None else {name: keys[name] for name in RUN}


def read_items(root: Path) -> pd.DataFrame:
    """Per-item values of every ``question_scores.parquet`` under ``root`` (see the module)."""
    frames = []
    for path in sorted(root.rglob("question_scores.parquet")):
        if _REPEAT_DIR.match(path.relative_to(root).parts[0]):
            continue  # a repeat with another seed (`repeats:`): the summary has its spread
        try:
            frame = read_table(path)
        except (OSError, TableError, ValueError) as exc:
            raise ReportError(f"{path}: not a readable Parquet table: {exc}") from exc
        if list(frame.columns) == QUESTION_SCORES.names:
            answer = frame[frame["level"] == "answer"]
            frames.append(
                answer.assign(item=answer["question_id"], cluster=answer["question_id"])[
                    ITEM_COLUMNS
                ]
            )
        elif {"user_id", "period", "question_id", "correct", "upper_bound"} <= set(frame.columns):
            keys = _keys_from_path(path, root)
            if keys is None:
                raise ReportError(
                    f"{path}: AMemGym question scores outside {RUN_FOLDER}: cannot tell their run"
                )
            if len(frame):
                frames.append(_amemgym_items(frame, keys))
        else:
            raise ReportError(
                f"{path}: columns {list(frame.columns)} are neither QUESTION_SCORES' nor "
                "AMemGym's per-question scores' (user_id, period, question_id, correct, ...)"
            )
    if not frames:
        return pd.DataFrame(columns=ITEM_COLUMNS)
    items = pd.concat(frames, ignore_index=True)
    items["value"] = items["value"].astype(float)
    return items


def load_run(path: str | Path) -> Run:
    """A results folder (or its ``summary.parquet``) with the per-item values under it."""
    path = Path(path)
    summary_path = path if path.suffix == ".parquet" else path / "summary.parquet"
    if not summary_path.is_file():
        raise ReportError(f"{summary_path}: no summary table (is {path} a results folder?)")
    try:
        summary = read_table(summary_path, "summary")
    except TableError as exc:
        raise ReportError(str(exc)) from exc
    return Run(summary_path.parent, summary, read_items(summary_path.parent))


def _sample(run: Run, row) -> pd.DataFrame:
    """The items behind one summary row: the step's own (``micro``) or steps 0..step (the mean
    over periods)."""
    items = run.items
    if items.empty or row.aggregate not in TESTED:
        return items.iloc[:0]
    hit = (
        (items["benchmark"] == row.benchmark)
        & (items["system"] == row.system)
        & (items["protocol"] == row.protocol)
        & (items["metric"] == row.metric)
    )
    if row.aggregate == "micro":
        hit &= items["step"] == row.step
    else:
        hit &= items["step"] <= row.step
    return items[hit]


def cluster_interval(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """Percentile bootstrap of the mean over items, resampling whole clusters (users)."""
    codes, index = np.unique(clusters, return_inverse=True)
    sums = np.bincount(index, weights=values, minlength=codes.size)
    counts = np.bincount(index, minlength=codes.size).astype(float)
    if codes.size < 2:
        return float(values.mean()), float(values.mean())
    rng = np.random.default_rng(0)
    draws = rng.integers(0, codes.size, size=(2000, codes.size))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def interval(run: Run, row) -> tuple[float, float, str]:
    """(low, high, method) of one summary row; method "" when there is none, ``degenerate``
    (no bounds) when the resampled means cannot vary."""
    sample = _sample(run, row)
    if len(sample):
        values = sample["value"].to_numpy(dtype=float)
        if len(values) != row.n or abs(values.mean() - row.value) > _TOLERANCE:
            return math.nan, math.nan, "mismatch"
        if sample["cluster"].nunique() < len(sample) or row.metric in NORMALIZED:
            low, high = cluster_interval(values, sample["cluster"].to_numpy())
            method = "cluster-bootstrap"
        else:
            found = mean_interval(values)
            low, high, method = found.low, found.high, found.method
        if not high - low > 1e-12:
            return math.nan, math.nan, DEGENERATE
        return low, high, method
    proportion = is_proportion(row.metric) or row.metric in _BASELINES
    if proportion and row.metric not in NORMALIZED and row.n > 0 and 0.0 <= row.value <= 1.0:
        low, high = wilson_interval(row.value * row.n, int(row.n))
        return low, high, "wilson-n"
    return math.nan, math.nan, ""


def _outside(value: float, low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(value):
        return ""
    return "yes" if value < low - 1e-12 or value > high + 1e-12 else "no"


# ---------------------------------------------------------------- published vs ours


def check_pairs(mapping: list[tuple[str, str]], systems: set[str]) -> None:
    """Every ``(ours, theirs)`` pair names a system of the run; else one line naming it."""
    for ours, theirs in mapping:
        if ours not in systems:
            raise ReportError(
                f"pairing {ours}={theirs} (--map or published_as): the run has no system {ours!r} "
                f"(it has {', '.join(sorted(systems))})"
            )


def _pairing(published: pd.DataFrame, systems: set[str], mapping: list[tuple[str, str]]):
    """Published row name -> our system: ``--map OURS=THEIRS`` pairs, then equal names."""
    check_pairs(mapping, systems)
    theirs_to_ours: dict[str, str] = {}
    for ours, theirs in mapping:
        if theirs not in set(published["row"]):
            raise ReportError(
                f"pairing {ours}={theirs}: the published tables have no row {theirs!r}"
            )
        if theirs_to_ours.get(theirs, ours) != ours:
            raise ReportError(
                f"published row {theirs!r} is paired with both "
                f"{theirs_to_ours[theirs]!r} and {ours!r}"
            )
        theirs_to_ours[theirs] = ours
    mapped = set(theirs_to_ours.values())
    for name in set(published["row"]) & systems:
        if name not in mapped:  # a system already paired by name is not paired twice
            theirs_to_ours.setdefault(name, name)
    return theirs_to_ours


def _our_row(summary: pd.DataFrame, benchmark, system, cell: dict):
    """Our summary row for a published cell, or None. Aggregate ``mean``: period ``mean`` is the
    run's last step's row of the first of :data:`MEAN_AGGREGATES` it has, period k step k's micro
    row; aggregate ``type:<question_type>`` that step's row of the same aggregate."""
    run = summary[
        (summary["benchmark"] == benchmark)
        & (summary["system"] == system)
        & (summary["protocol"] == cell["protocol"])
        & (summary["metric"] == cell["metric"])
    ]
    if run.empty:
        return None
    period = cell["period"]
    step = run[run["step"] == (run["step"].max() if period == MEAN else int(period))]
    wanted = cell.get("aggregate", MEAN)
    if wanted != MEAN:
        hit = step[step["aggregate"] == wanted]
    elif period == MEAN:
        for aggregate in MEAN_AGGREGATES:
            hit = step[step["aggregate"] == aggregate]
            if not hit.empty:
                break
    else:
        hit = step[step["aggregate"] == "micro"]
    return None if hit.empty else next(hit.itertuples(index=False))


def _benchmarks_of(summary: pd.DataFrame, name: str, benchmark: str | None) -> dict[str, str]:
    """Our system -> the benchmark its cells are compared on, for published rows of benchmark
    ``name``: ``benchmark`` if given, else ``name`` if the run has it, else each system's own
    benchmark where it runs on exactly one (a preset whose systems run on different benchmarks:
    LoCoMo's long context and retrieval)."""
    ours = sorted(summary["benchmark"].unique())
    chosen = benchmark or (name if name in ours else None)
    if chosen is not None:
        if chosen not in ours:
            raise ReportError(
                f"the run has no benchmark {chosen!r} for the published {name!r} rows "
                f"(it has {', '.join(ours)}; name it with --benchmark)"
            )
        return dict.fromkeys(summary.loc[summary["benchmark"] == chosen, "system"], chosen)
    where = summary.groupby("system")["benchmark"].unique()
    return {system: names[0] for system, names in where.items() if len(names) == 1}


def unpaired_rows(cells: pd.DataFrame) -> pd.DataFrame:
    """The published rows no system of the run is paired with, one line per row and reason: paper,
    table, row, its number of cells and the reason (the preset's ``compare.unpaired``, else its
    note; a row of a table over several benchmarks may have one reason per benchmark)."""
    columns = ["paper", "table", "row", "cells", "reason"]
    alone = cells[cells["system"] == ""]
    if alone.empty:
        return pd.DataFrame(columns=columns)
    grouped = alone.groupby(["paper", "table", "row", "note"], sort=False)["note"]
    out = grouped.agg(cells="size").reset_index().rename(columns={"note": "reason"})
    return out[columns]


CELL_COLUMNS = [
    "paper",
    "table",
    "row",
    "system",
    "protocol",
    "period",
    "aggregate",
    "metric",
    "published",
    "ours",
    "ci_low",
    "ci_high",
    "ci_method",
    "n",
    "diff",
    "outside",
    "note",
    "benchmark",
]
#: With ``repeats: N``, each paired cell's mean and sd across the seeds and their number (our value
#: and interval are the base seed's): columns only a repeated run's comparison has.
SEED_COLUMNS = ["seeds_mean", "seeds_sd", "seeds"]


def compare_published(
    run: Run,
    published: pd.DataFrame,
    mapping: list[tuple[str, str]] = (),
    benchmark: str | None = None,
    unpaired: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(cells, taus, ranks) of a run against published rows (see the module docstring).

    ``benchmark`` is our benchmark's name (default: the published benchmark's own name, else
    each paired system's own benchmark); ``unpaired`` the reason a row has no counterpart
    (published row -> reason), the note of its cells when no system is paired with it."""
    summary = run.summary
    _pairing(published, set(summary["system"]), list(mapping))  # every pair names a real row
    published, absent = _split_absent(published, summary, benchmark)
    reasons = unpaired or {}
    cells = []
    for name, part in published.groupby("benchmark", sort=True):
        where = _benchmarks_of(summary, name, benchmark)
        rows = set(part["row"])
        for ours, theirs in mapping:
            if theirs in rows and ours not in where and ours in set(summary["system"]):
                runs_on = sorted(summary.loc[summary["system"] == ours, "benchmark"].unique())
                raise ReportError(
                    f"pairing {ours}={theirs}: {ours} runs on several benchmarks "
                    f"({', '.join(runs_on)}); name the one to compare with --benchmark"
                )
        # a table over several benchmarks may lack a row on one (MemoryBench's Mem0 on Open)
        pairing = _pairing(part, set(where), [p for p in mapping if p[1] in rows and p[0] in where])
        if not pairing and name not in set(summary["benchmark"]) and benchmark is None:
            raise ReportError(
                f"the run has no benchmark {name!r} for the published {name!r} rows and none of "
                f"its systems is paired with them (it has "
                f"{', '.join(sorted(summary['benchmark'].unique()))}; name it with --benchmark)"
            )
        periods = part[part["period"] != MEAN].groupby("table")["period"]
        last_published = periods.apply(lambda p: max(int(x) for x in p)).to_dict()
        for cell in part.to_dict("records"):
            system = pairing.get(cell["row"], "")
            found = (
                _our_row(summary, where[system], system, cell)
                if system and cell["metric"] != RANK_CHANGE
                else None
            )
            keys = ("paper", "table", "row", "protocol", "period", "aggregate", "metric")
            out = {
                **{k: cell.get(k, MEAN) for k in keys},
                "system": system,
                "published": cell["value"],
                "ours": math.nan,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "ci_method": "",
                "n": 0,
                "diff": math.nan,
                "outside": "",
                "note": reasons.get(cell["row"], "not paired") if not system else "",
            }
            out["benchmark"] = name  # the published benchmark (a MemoryBench set, ...)
            if system and found is None and cell["metric"] != RANK_CHANGE:
                out["note"] = "not in the run"
            if found is not None:
                low, high, method = interval(run, found)
                out.update(
                    ours=found.value,
                    ci_low=low,
                    ci_high=high,
                    ci_method=method,
                    n=int(found.n),
                    diff=found.value - cell["value"],
                    outside=_outside(cell["value"], low, high),
                )
                paper_last = last_published.get(cell["table"])
                if cell["period"] == MEAN and paper_last is not None and found.step < paper_last:
                    out["note"] = (
                        f"ours: mean over periods 0-{found.step}, the paper's 0-{paper_last}"
                    )
            if has_seeds(summary):
                out.update(_seed_values(summary, found))
            cells.append(out)
    columns = CELL_COLUMNS + (SEED_COLUMNS if has_seeds(summary) else [])
    cells += _absent_cells(absent, columns)
    cells = _rank_change_cells(pd.DataFrame(cells, columns=columns))
    taus, ranks = _rank_tables(cells[cells["metric"] != RANK_CHANGE])
    return cells, taus, ranks


def _split_absent(published: pd.DataFrame, summary: pd.DataFrame, benchmark: str | None):
    """(rows to compare, rows of benchmarks the run lacks). A table over several benchmarks
    (MemoryBench's seven sets) compared with a run of some of them: the other benchmarks' cells
    are listed as not in the run, never compared with another benchmark. Only when no
    ``benchmark`` is named and the run has at least one of the published benchmarks."""
    has = published["benchmark"].isin(set(summary["benchmark"]))
    if benchmark is not None or not has.any():
        return published, published.iloc[:0]
    return published[has], published[~has]


def _absent_cells(rows: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Unpaired cells of published rows whose benchmark the run does not have."""
    blank = {"system": "", "ci_method": "", "n": 0, "outside": ""}
    return [
        {
            **{c: cell.get(c, blank.get(c, math.nan)) for c in columns},
            **blank,
            "published": cell["value"],
            "note": f"the run has no benchmark {cell['benchmark']!r}",
        }
        for cell in rows.to_dict("records")
    ]


def _seed_values(summary: pd.DataFrame, row) -> dict:
    """``seeds_mean``, ``seeds_sd`` and ``seeds`` of our summary row ``row`` (None: no row)."""
    out = {"seeds_mean": math.nan, "seeds_sd": math.nan, "seeds": 0}
    if row is None:
        return out
    same = summary[
        (summary["benchmark"] == row.benchmark)
        & (summary["system"] == row.system)
        & (summary["protocol"] == row.protocol)
        & (summary["step"] == row.step)
        & (summary["metric"] == row.metric)
    ]
    for name, aggregate in (("seeds_mean", SEEDS_MEAN), ("seeds_sd", SEEDS_SD)):
        hit = same[same["aggregate"] == f"{aggregate}:{row.aggregate}"]
        if not hit.empty:
            out[name] = float(hit["value"].iloc[0])
            out["seeds"] = int(hit["n"].iloc[0])
    return out


#: The protocols whose rankings a published ``rank_change`` compares (AMemGym's on- vs
#: off-policy table: ▲k = k places higher off-policy).
ON_POLICY, OFF_POLICY = "interactive", "interactive_replay"


def _rank_change_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Our own on- to off-policy rank change beside each published ``rank_change``: the rows of
    the table with our value under both protocols at period ``mean``, ranked by the table's
    score under each (``on rank - off rank``: positive = higher off-policy, as ▲ reads)."""
    changes = cells["metric"] == RANK_CHANGE
    if not changes.any():
        return cells
    cells = cells.copy()
    overall = (cells["period"] == MEAN) & (cells["aggregate"] == MEAN)
    scores = cells[~changes & overall & cells["ours"].notna()]
    for (paper, table), group in cells[changes].groupby(["paper", "table"], sort=True):
        part = scores[(scores["paper"] == paper) & (scores["table"] == table)]
        if part.empty:
            continue
        metric = sorted(part["metric"].unique())[0]
        part = part[part["metric"] == metric]
        on = part[part["protocol"] == ON_POLICY].set_index("row")["ours"]
        off = part[part["protocol"] == OFF_POLICY].set_index("row")["ours"]
        rows = sorted(set(on.index) & set(off.index))
        if len(rows) < 2:
            continue
        higher = not lower_is_better(metric)
        on_rank = dict(zip(rows, rank_of(on.loc[rows], higher), strict=True))
        off_rank = dict(zip(rows, rank_of(off.loc[rows], higher), strict=True))
        for index in group.index:
            row = cells.at[index, "row"]
            if row not in on_rank:
                continue
            change = on_rank[row] - off_rank[row]
            cells.loc[index, ["ours", "diff", "n"]] = [
                float(change),
                change - cells.at[index, "published"],
                len(rows),
            ]
            cells.at[index, "note"] = (
                f"ours: {metric} rank change from {ON_POLICY} to {OFF_POLICY} among the "
                f"{len(rows)} paired rows"
            )
    return cells


TAU_COLUMNS = ["paper", "table", "protocol", "metric", "n", "tau", "benchmark"]
RANK_COLUMNS = ["paper", "table", "protocol", "metric", "row", "system"]
RANK_COLUMNS += ["published", "ours", "published_rank", "our_rank", "rank_change", "benchmark"]


def _rank_tables(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (table, benchmark, protocol, metric) at period and aggregate ``mean`` (all questions;
    not per question type): τ and each row's rank change (a table over several benchmarks, such as
    MemoryBench's sets, is ranked per benchmark)."""
    taus, ranks = [], []
    paired = cells[(cells["period"] == MEAN) & (cells["aggregate"] == MEAN) & cells["ours"].notna()]
    for (paper, table, benchmark, protocol, metric), group in paired.groupby(
        ["paper", "table", "benchmark", "protocol", "metric"], sort=True
    ):
        if len(group) < 2:
            continue
        higher = not lower_is_better(metric)
        taus.append(
            {
                "paper": paper,
                "table": table,
                "benchmark": benchmark,
                "protocol": protocol,
                "metric": metric,
                "n": len(group),
                "tau": kendall_tau(group["published"], group["ours"]),
            }
        )
        group = group.sort_values("published", ascending=not higher, kind="stable")
        theirs = rank_of(group["published"], higher)
        ours = rank_of(group["ours"], higher)
        marks = rank_marks(group["published"], group["ours"], higher)
        for i, row in enumerate(group.itertuples(index=False)):
            ranks.append(
                {
                    "paper": paper,
                    "table": table,
                    "benchmark": benchmark,
                    "protocol": protocol,
                    "metric": metric,
                    "row": row.row,
                    "system": row.system,
                    "published": row.published,
                    "ours": row.ours,
                    "published_rank": theirs[i],
                    "our_rank": ours[i],
                    "rank_change": marks[i],
                }
            )
    return pd.DataFrame(taus, columns=TAU_COLUMNS), pd.DataFrame(ranks, columns=RANK_COLUMNS)


# ---------------------------------------------------------------- run A vs run B


PAIRED_COLUMNS = ["test", "n_paired", "clusters", "p_value", "p_holm", "significant"]
PAIRED_COLUMNS += ["diff_low", "diff_high", "b", "c"]
#: A paired test's difference is called more than noise below this (Holm-adjusted) p-value.
ALPHA = 0.05
#: The family Holm's adjustment runs over: every pair compared on one metric and aggregate of
#: one benchmark and protocol (and step, between the systems of one run).
HOLM_FAMILY = ["benchmark", "protocol", "metric", "aggregate"]


def _paired(sample_a: pd.DataFrame, sample_b: pd.DataFrame) -> dict:
    """The paired test of two samples on the items both have (empty when they share none):
    over clusters when items share one, else over items."""
    a = sample_a.drop_duplicates("item").set_index("item")
    b = sample_b.drop_duplicates("item").set_index("item")["value"]
    shared = a.index.intersection(b.index).sort_values()
    if len(shared) == 0:
        return {}
    clusters = a.loc[shared, "cluster"].to_numpy()
    values_a, values_b = a.loc[shared, "value"].to_numpy(), b.loc[shared].to_numpy()
    if len(set(clusters)) < len(clusters):
        test = cluster_paired_test(values_a, values_b, clusters)
    else:
        test = paired_test(values_a, values_b)
    mcnemar = test.test == "mcnemar"
    return {
        "test": test.test,
        "n_paired": test.n,
        "clusters": test.clusters or None,
        "p_value": test.p_value,
        "diff_low": test.low,
        "diff_high": test.high,
        "b": test.b if mcnemar else None,
        "c": test.c if mcnemar else None,
    }


def _holm_adjusted(frame: pd.DataFrame, family: list[str]) -> pd.DataFrame:
    """``p_holm`` (Holm over each ``family`` group of tested rows) and ``significant``."""
    frame["p_holm"] = math.nan
    tested = frame[frame["p_value"].notna()]
    for _, group in tested.groupby(family, sort=False):
        frame.loc[group.index, "p_holm"] = holm(group["p_value"].astype(float))
    frame["significant"] = [
        None if pd.isna(p) else ("yes" if p < ALPHA else "no") for p in frame["p_holm"]
    ]
    return frame


RUNS_COLUMNS = [*RUN, "metric", "aggregate", "a_value", "a_low", "a_high", "a_ci_method", "n_a"]
RUNS_COLUMNS += ["b_value", "n_b", "diff", "outside", *PAIRED_COLUMNS]


def compare_runs(a: Run, b: Run) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(cells, taus, ranks) of run B against run A on the summary rows both have.

    A cell holds A's value and interval, B's value, B - A, whether B's value lies outside A's
    interval and, at each run's last step, the paired test on the items both runs scored."""
    keys = [*RUN, "metric", "aggregate"]
    joined = _compared(a.summary).merge(_compared(b.summary), on=keys, suffixes=("_a", "_b"))
    last = joined.groupby(["benchmark", "system", "protocol"])["step"].transform("max")
    cells = []
    for row, last_step in zip(joined.to_dict("records"), last, strict=True):
        key = {k: row[k] for k in keys}
        a_row = SimpleNamespace(**key, value=row["value_a"], n=row["n_a"])
        low, high, method = interval(a, a_row)
        cell = {
            **key,
            "a_value": row["value_a"],
            "a_low": low,
            "a_high": high,
            "a_ci_method": method,
            "n_a": int(row["n_a"]),
            "b_value": row["value_b"],
            "n_b": int(row["n_b"]),
            "diff": row["value_b"] - row["value_a"],
            "outside": _outside(row["value_b"], low, high),
        }
        if row["aggregate"] in TESTED and row["step"] == last_step:
            cell.update(_paired(_sample(a, a_row), _sample(b, a_row)))
        cells.append(cell)
    cells = _counts(_holm_adjusted(pd.DataFrame(cells, columns=RUNS_COLUMNS), HOLM_FAMILY))
    return (cells, *_run_ranks(cells))


def _compared(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows two runs are compared on: not the footprint (retrieval wall clock and snapshot
    size: measurements of the machine and the storage, not scores with an interval or a rank),
    nor the spread across seeds (``repeats``: the base seed's rows are compared)."""
    spread = summary["aggregate"].astype(str).str.startswith((SEEDS_MEAN, SEEDS_SD))
    return summary[~summary["metric"].isin(FOOTPRINT_METRICS) & ~spread]


RUN_TAU_COLUMNS = ["benchmark", "protocol", "metric", "aggregate", "n", "tau"]
RUN_RANK_COLUMNS = ["benchmark", "protocol", "metric", "aggregate", "system", "a_value", "b_value"]
RUN_RANK_COLUMNS += ["rank_a", "rank_b", "rank_change"]


def _run_ranks(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """τ of the systems between A and B per (benchmark, protocol, metric, aggregate) at each
    run's last step, and each system's rank change (``▲k``: B ranks it k places higher)."""
    taus, ranks = [], []
    if cells.empty:
        return pd.DataFrame(columns=RUN_TAU_COLUMNS), pd.DataFrame(columns=RUN_RANK_COLUMNS)
    final = cells[
        cells["step"] == cells.groupby(["benchmark", "system", "protocol"])["step"].transform("max")
    ]
    final = final[final["aggregate"].isin(TESTED)]
    for (benchmark, protocol, metric, aggregate), group in final.groupby(
        ["benchmark", "protocol", "metric", "aggregate"], sort=True
    ):
        if len(group) < 2:
            continue
        higher = not lower_is_better(metric)
        key = {
            "benchmark": benchmark,
            "protocol": protocol,
            "metric": metric,
            "aggregate": aggregate,
        }
        taus.append(
            {**key, "n": len(group), "tau": kendall_tau(group["a_value"], group["b_value"])}
        )
        group = group.sort_values("a_value", ascending=not higher, kind="stable")
        rank_a, rank_b = rank_of(group["a_value"], higher), rank_of(group["b_value"], higher)
        marks = rank_marks(group["a_value"], group["b_value"], higher)
        for i, row in enumerate(group.itertuples(index=False)):
            ranks.append(
                {
                    **key,
                    "system": row.system,
                    "a_value": row.a_value,
                    "b_value": row.b_value,
                    "rank_a": rank_a[i],
                    "rank_b": rank_b[i],
                    "rank_change": marks[i],
                }
            )
    return pd.DataFrame(taus, columns=RUN_TAU_COLUMNS), pd.DataFrame(
        ranks, columns=RUN_RANK_COLUMNS
    )


# ---------------------------------------------------------------- systems of one run

SYSTEMS_COLUMNS = ["benchmark", "protocol", "step", "metric", "aggregate", "system_a", "system_b"]
SYSTEMS_COLUMNS += ["mean_a", "mean_b", "diff", *PAIRED_COLUMNS]


def paired_systems(run: Run) -> pd.DataFrame:
    """Every pair of systems of one run, at their last step, on the items both scored: mean of
    each, B - A, and the paired test (over clusters when items share one; else McNemar for
    right / wrong values, else the bootstrap), Holm-adjusted over the pairs of one metric."""
    summary = run.summary[run.summary["aggregate"].isin(TESTED)]
    if summary.empty or run.items.empty:
        return pd.DataFrame(columns=SYSTEMS_COLUMNS)
    final = summary[
        summary["step"]
        == summary.groupby(["benchmark", "system", "protocol"])["step"].transform("max")
    ]
    rows = []
    for (benchmark, protocol, step, metric, aggregate), group in final.groupby(
        ["benchmark", "protocol", "step", "metric", "aggregate"], sort=True
    ):
        samples = {
            r.system: _sample(run, r) for r in group.sort_values("system").itertuples(index=False)
        }
        samples = {k: v for k, v in samples.items() if len(v)}
        names = sorted(samples)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                result = _paired(samples[first], samples[second])
                if not result:
                    continue
                a = samples[first].drop_duplicates("item").set_index("item")["value"]
                b = samples[second].drop_duplicates("item").set_index("item")["value"]
                shared = a.index.intersection(b.index)
                rows.append(
                    {
                        "benchmark": benchmark,
                        "protocol": protocol,
                        "step": step,
                        "metric": metric,
                        "aggregate": aggregate,
                        "system_a": first,
                        "system_b": second,
                        "mean_a": float(a.loc[shared].mean()),
                        "mean_b": float(b.loc[shared].mean()),
                        "diff": float((b.loc[shared] - a.loc[shared]).mean()),
                        **result,
                    }
                )
    frame = pd.DataFrame(rows, columns=SYSTEMS_COLUMNS)
    return _counts(_holm_adjusted(frame, [*HOLM_FAMILY, "step"]))


def _counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Integer columns that are empty where no test (or not McNemar's) ran."""
    for name in ("n_paired", "clusters", "b", "c"):
        frame[name] = frame[name].astype("Int64")
    return frame


# ---------------------------------------------------------------- Markdown


def _fmt(value) -> str:
    if value is None or value is pd.NA:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        text = f"{value:.3f}"
        return "0.000" if text == "-0.000" else text
    return str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    """A frame as a GitHub Markdown table (floats to 3 decimals, NaN as –)."""
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
