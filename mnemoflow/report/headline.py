"""What the report opens with: one headline table per benchmark, and the counters set apart.

A researcher reading a report wants each benchmark's scores first (systems as rows, the
benchmark's headline metrics as columns, each with its 95 % interval, the published value beside
ours where a preset defines one); the internal counters a run also writes (``parse_failures``,
``memory_score_undefined``, ``evolution_unparsed``, ...) say whether the numbers can be trusted,
not how good a system is, so they go to a diagnostics table of their own. The split is by name:
a metric is a headline metric when it is a score a paper reports (accuracy, J, F1, MemoryBench's
item value, AMemGym's memory score, retrieval recall / NDCG); the ``<metric>:all`` / ``:scored``
/ ``:unscored`` denominators (docs/tables.md) are counters, except that a benchmark with some
unscored items also shows ``<metric> (all items)`` beside the headline one; the
``<cause>_rate`` failure shares and feedback rates have their own sections. Everything else is a
counter, so a new counter lands in diagnostics without a change here.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from mnemoflow.data.tables import FOOTPRINT_METRICS
from mnemoflow.report.seeds import seed_texts
from mnemoflow.report.summaries import RUN, add_labels, last_step, with_intervals

#: Headline metrics, in the order their columns appear (retrieval metrics follow, sorted).
HEADLINE_METRICS = ("accuracy", "j", "f1", "item_value", "llm_judge_score", "memory_score")
_RETRIEVAL = re.compile(r"(recall|ndcg)")
#: Aggregates a counter's last-step value is read from, the first a run has.
COUNTER_AGGREGATES = ("count", "micro", "mean_over_periods")
#: The aggregate AMemGym reports (mean over periods at the last step): a column of its own.
MEAN_OVER_PERIODS = "mean_over_periods"
DENOMINATOR_SUFFIXES = (":all", ":scored", ":unscored")
#: A memory's footprint (mnemoflow.eval.static_qa.footprint), the last columns of a headline table:
#: the columns memory papers lead with beside accuracy. Values without intervals.
FOOTPRINT_LABELS = {
    "retrieval_ms_p50": "retrieval p50 (ms)",
    "retrieval_ms_p95": "retrieval p95 (ms)",
    "retrieval_ms_cold": "first retrieval (ms)",
    "memory_kb": "snapshot (KiB / episode)",
}


def is_headline(metric: str) -> bool:
    """A score a paper reports for a system (not a counter, a denominator or a failure share)."""
    if ":" in metric or metric.endswith("_rate") or "parse" in metric:
        return False
    return metric in HEADLINE_METRICS or bool(_RETRIEVAL.search(metric))


def is_counter(metric: str) -> bool:
    """Shown in the diagnostics section: neither a headline metric nor a ``_rate`` share (the
    diagnosis and feedback sections show those), the two denominators included."""
    return (
        not is_headline(metric)
        and not metric.endswith("_rate")
        and (metric not in FOOTPRINT_METRICS)
    )


def headline_metrics(metrics) -> list[str]:
    """The headline metrics among ``metrics``, in column order."""
    present = {m for m in metrics if is_headline(m)}
    ordered = [m for m in HEADLINE_METRICS if m in present]
    return ordered + sorted(present - set(ordered))


def _ci_text(low: float, high: float, method: str) -> str:
    if pd.notna(low):
        return f"[{low:.3f}, {high:.3f}]"
    return method or ""


def headline_tables(
    scored: pd.DataFrame, published: pd.DataFrame | None = None
) -> dict[str, pd.DataFrame]:
    """Per benchmark, one row per run (``label``) at its last step: ``n`` and per headline metric
    its micro value with the interval (``<metric>`` and ``<metric> 95 % CI``), with repeats its mean
    ± sd across seeds (``<metric> mean ± sd (seeds)``; the same beside the mean over periods),
    AMemGym's mean over
    periods where the run has one (``<metric> (mean over periods)``), ``<metric> (all items)``
    where some items went unscored, ``<metric> (published)`` where ``published`` (the cells
    of :func:`mnemoflow.report.compare.compare_published`) pairs a published mean with the run,
    then the memory's footprint where the run measured it (:data:`FOOTPRINT_METRICS`).
    Rows are sorted best first by the first headline metric."""
    final = last_step(scored)
    tables: dict[str, pd.DataFrame] = {}
    for benchmark, rows in final.groupby("benchmark", sort=True):
        metrics = headline_metrics(rows["metric"].unique())
        if not metrics:
            continue
        rows = _benchmark_labels(rows)
        runs = rows[["label", "system", "protocol", "step"]].drop_duplicates("label")
        table = runs.set_index("label")
        columns: list[str] = []
        ns = []
        for metric in metrics:
            micro = rows[(rows["metric"] == metric) & (rows["aggregate"] == "micro")]
            micro = micro.set_index("label")
            table[metric] = micro["value"]
            table[f"{metric} 95 % CI"] = [
                _ci_text(r.ci_low, r.ci_high, r.ci_method) if r is not None else ""
                for r in (
                    micro.loc[label] if label in micro.index else None for label in table.index
                )
            ]
            columns += [metric, f"{metric} 95 % CI"]
            columns += _across_seeds(table, rows, metric, "micro", metric)
            ns.append(micro["n"])
            mean = rows[(rows["metric"] == metric) & (rows["aggregate"] == MEAN_OVER_PERIODS)]
            if not mean.empty:
                name = f"{metric} (mean over periods)"
                table[name] = mean.set_index("label")["value"]
                columns.append(name)
                columns += _across_seeds(table, rows, metric, MEAN_OVER_PERIODS, name)
            unscored = rows[
                (rows["metric"] == f"{metric}:unscored")
                & rows["aggregate"].isin(("micro", MEAN_OVER_PERIODS))
            ]
            if unscored["value"].fillna(0).gt(0).any():
                every = rows[(rows["metric"] == f"{metric}:all") & (rows["aggregate"] == "micro")]
                name = f"{metric} (all items)"
                table[name] = every.set_index("label")["value"]
                columns.append(name)
            if published is not None and not published.empty:
                name = f"{metric} (published)"
                values = _published_values(published, runs, metric)
                if values:
                    table[name] = [values.get(label, math.nan) for label in table.index]
                    columns.append(name)
        for metric, name in FOOTPRINT_LABELS.items():
            values = rows[(rows["metric"] == metric) & (rows["aggregate"] == "micro")]
            if not values.empty:
                table[name] = values.set_index("label")["value"]
                columns.append(name)
        table["n"] = pd.concat(ns, axis=1).max(axis=1) if ns else math.nan
        first = metrics[0]
        table = table.sort_values(first, ascending=False, kind="stable", na_position="last")
        table = table.reset_index()[["label", "system", "protocol", "step", "n", *columns]]
        tables[str(benchmark)] = table.rename(columns={"label": "run"})
    return tables


def run_headline(
    summary: pd.DataFrame, judgements: pd.DataFrame, published: pd.DataFrame | None = None
) -> dict[str, pd.DataFrame]:
    """:func:`headline_tables` of a summary, its intervals from the per-question
    ``judgements``: the tables report.html and summary.md both open with."""
    if summary.empty:
        return {}
    return headline_tables(add_labels(with_intervals(summary, judgements)), published)


def _across_seeds(
    table: pd.DataFrame, rows: pd.DataFrame, metric: str, aggregate: str, name: str
) -> list[str]:
    """``<name> mean ± sd (seeds)`` beside the column ``name`` when the run has repeats
    (``report.seeds``): the new column's name, or nothing."""
    texts = seed_texts(rows, metric, aggregate)
    if not texts:
        return []
    column = f"{name} mean ± sd (seeds)"
    table[column] = [texts.get(label, "–") for label in table.index]
    return [column]


def _benchmark_labels(rows: pd.DataFrame) -> pd.DataFrame:
    """A run is its system within a benchmark of one protocol, else "system · protocol"."""
    if rows["protocol"].nunique() > 1:
        return rows.assign(label=rows["system"] + " · " + rows["protocol"])
    return rows.assign(label=rows["system"])


def _published_values(cells: pd.DataFrame, runs: pd.DataFrame, metric: str) -> dict[str, float]:
    """label -> the published mean of ``metric`` paired with that run (system and protocol)."""
    mean = cells[(cells["metric"] == metric) & (cells["period"].astype(str) == "mean")]
    if "aggregate" in mean.columns:  # all questions, not one question type
        mean = mean[mean["aggregate"] == "mean"]
    mean = mean[(mean["system"] != "") & mean["published"].notna()]  # ours alone: no value
    out: dict[str, float] = {}
    for run in runs.itertuples(index=False):
        hit = mean[(mean["system"] == run.system) & (mean["protocol"] == run.protocol)]
        if not hit.empty:
            out[run.label] = float(hit["published"].iloc[0])
    return out


def diagnostics_tables(scored: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per benchmark, the counters of each run at its last step: one row per run, one column per
    counter (its ``count`` aggregate, else ``micro``, else the mean over periods)."""
    final = last_step(scored)
    counters = final[final["metric"].map(is_counter)]
    rank = {a: i for i, a in enumerate(COUNTER_AGGREGATES)}
    counters = counters[counters["aggregate"].isin(rank)]
    counters = counters.assign(_rank=counters["aggregate"].map(rank))
    counters = counters.sort_values([*RUN, "metric", "_rank"]).drop_duplicates([*RUN, "metric"])
    tables: dict[str, pd.DataFrame] = {}
    for benchmark, rows in counters.groupby("benchmark", sort=True):
        rows = _benchmark_labels(rows)
        wide = rows.pivot_table(
            index=["label", "step"], columns="metric", values="value", aggfunc="first"
        )
        wide.columns.name = None
        tables[str(benchmark)] = wide.reset_index().rename(columns={"label": "run"})
    return tables
