"""The interactive family's report (AMemGym): scores per period, failures per period, and the
on- vs off-policy ranking, computed from the summary and diagnosis tables only.

- Per period: overall accuracy and memory score of each run (system · protocol), plus the mean
  over periods, AMemGym's reported number; beside them the random baseline and the upper bound
  the memory score is measured between, and which memory scores are not meaningful (upper bound
  - random below :data:`MIN_GAP`, or some (user, period) with upper bound below random).
- Failures per period: write / read / utilization as shares of all questions of the period, which
  stack up to 1 - accuracy (the reference's published per-period figures).
- Reuse bias (the paper's on- vs off-policy question): each system's rank by memory score when it
  conversed itself (``interactive``) and when it memorized another system's transcripts
  (``interactive_replay``), with the rank change.
- Self-evolution (the paper's Table 3): :mod:`mnemoflow.report.evolution`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure

from mnemoflow.report.plots import FAILURE_COLOURS, STYLE, _new_figure, _panels

ON_POLICY = "interactive"
OFF_POLICY = "interactive_replay"
PROTOCOLS = (ON_POLICY, OFF_POLICY)
STAGES = ("write", "read", "utilization")
#: AMemGym's meaning of each stage (recall probes, not evidence ids as in static QA).
STAGE_NAMES = {
    "write": "write (recalled wrong since the info last changed)",
    "read": "read (recalled right then, wrong now)",
    "utilization": "utilization (recalled right, answered wrong)",
}


def interactive_rows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["protocol"].isin(PROTOCOLS)]


#: The memory score's baselines (scorer metrics) and their labels.
BASELINES = (
    ("random", "random"),
    ("upper_bound", "upper bound"),
    ("upper_below_random", "(user, period) pairs with upper bound < random"),
)
#: Below this gap between upper bound and random, (accuracy - random) / (upper bound - random)
#: magnifies a few questions into large scores: the memory score is marked not meaningful.
MIN_GAP = 0.1
NOT_MEANINGFUL = "not meaningful"
_RUN = ["benchmark", "system", "protocol"]


def baseline_table(summary: pd.DataFrame) -> pd.DataFrame:
    """benchmark, runs, baseline, ``period k`` columns and ``mean``: random, upper bound, their
    gap and the pairs with upper bound < random. They depend on the environment and the agent's
    model, not on the memory system: runs that agree share one row (``runs`` = ``all``), runs
    that differ get a row each (``runs`` = ``system · protocol``)."""
    parts = []
    for metric, label in BASELINES:
        table = period_table(summary, metric)
        if not table.empty:
            parts.append(table.assign(baseline=label))
    if len(parts) < 2:
        return pd.DataFrame()
    random, upper = parts[0].set_index(_RUN), parts[1].set_index(_RUN)
    values = [c for c in upper.columns if c != "baseline"]
    gap = (upper[values] - random[values]).assign(baseline="upper bound - random").reset_index()
    frames = [parts[0], parts[1], gap, *parts[2:]]
    table = pd.concat(frames, ignore_index=True)
    values = [c for c in table.columns if c not in (*_RUN, "baseline")]
    out = []
    for (benchmark, label), group in table.groupby(["benchmark", "baseline"], sort=False):
        distinct = group.drop_duplicates(subset=values)
        if len(distinct) == 1:
            out.append({"benchmark": benchmark, "runs": "all", "baseline": label,
                        **distinct[values].iloc[0].to_dict()})  # fmt: skip
            continue
        for row in group.to_dict("records"):
            runs = f"{row['system']} · {row['protocol']}"
            out.append({"benchmark": benchmark, "runs": runs, "baseline": label,
                        **{c: row[c] for c in values}})  # fmt: skip
    return pd.DataFrame(out, columns=["benchmark", "runs", "baseline", *values])


def not_meaningful(summary: pd.DataFrame) -> pd.Series:
    """True per (benchmark, system, protocol, step, aggregate) whose memory score is not
    meaningful: upper bound - random < :data:`MIN_GAP` over the same questions, or at least one
    (user, period) with upper bound < random. Only where both baselines are in the rows."""
    rows = interactive_rows(summary)
    rows = rows[rows["metric"].isin([metric for metric, _ in BASELINES])]
    keys = [*_RUN, "step", "aggregate"]
    if rows.empty:
        return pd.Series(dtype=bool)
    wide = rows.pivot_table(index=keys, columns="metric", values="value", aggfunc="first")
    if not {"random", "upper_bound"} <= set(wide.columns):
        return pd.Series(dtype=bool)
    gap = wide["upper_bound"] - wide["random"]
    below = wide["upper_below_random"] if "upper_below_random" in wide.columns else 0.0
    flags = (gap < MIN_GAP) | (pd.Series(below, index=wide.index).fillna(0.0) > 0)
    return flags[gap.notna()]


def memory_score_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`period_table` of the memory score, plus a ``not meaningful`` column naming the
    periods (and ``mean``) whose score is not meaningful (:func:`not_meaningful`); empty text
    when none is, ``unknown`` for a run without baselines (no column when no run has them)."""
    table = period_table(summary, "memory_score")
    if table.empty:
        return table
    flags = not_meaningful(summary)
    if flags.empty:
        return table
    rows = interactive_rows(summary)
    means = rows[(rows["metric"] == "memory_score") & (rows["aggregate"] == "mean_over_periods")]
    last = means.groupby(_RUN)["step"].max()
    marks = []
    for row in table.to_dict("records"):
        run = tuple(row[k] for k in _RUN)
        cells = [(c, (*run, int(c.removeprefix("period ")), "micro"))
                 for c in table.columns if c.startswith("period ")]  # fmt: skip
        if run in last.index:
            cells.append(("mean", (*run, int(last[run]), "mean_over_periods")))
        known = [(c, key) for c, key in cells if key in flags.index and pd.notna(row[c])]
        if not known:
            marks.append("unknown")
            continue
        marks.append(", ".join(c for c, key in known if flags[key]))
    return table.assign(**{NOT_MEANINGFUL: marks})


def period_table(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """benchmark, system, protocol, ``period k`` columns and ``mean`` (over periods)."""
    rows = interactive_rows(summary)
    rows = rows[rows["metric"] == metric]
    per_period = rows[rows["aggregate"] == "micro"]
    if per_period.empty:
        return pd.DataFrame()
    keys = ["benchmark", "system", "protocol"]
    table = per_period.pivot_table(index=keys, columns="step", values="value", aggfunc="first")
    table.columns = [f"period {c}" for c in table.columns]
    means = rows[rows["aggregate"] == "mean_over_periods"]
    last = means[means["step"] == means.groupby(keys)["step"].transform("max")]
    table["mean"] = last.set_index(keys)["value"]
    return table.reset_index()


def failure_table(summary: pd.DataFrame) -> pd.DataFrame:
    """benchmark, system, protocol, period, accuracy and the three failure shares of the period."""
    rows = interactive_rows(summary)
    rows = rows[rows["aggregate"] == "micro"]
    metrics = {"accuracy": "accuracy"} | {f"{s}_failure_rate": s for s in STAGES}
    rows = rows[rows["metric"].isin(metrics)]
    if rows.empty:
        return pd.DataFrame()
    wide = rows.pivot_table(
        index=["benchmark", "system", "protocol", "step"], columns="metric", values="value"
    ).rename(columns=metrics)
    wide = wide.reset_index().rename(columns={"step": "period"})
    order = ["benchmark", "system", "protocol", "period", "accuracy", *STAGES]
    return wide[[c for c in order if c in wide.columns]]


def rank_table(summary: pd.DataFrame, metric: str = "memory_score") -> pd.DataFrame:
    """Per benchmark and system with both protocols: mean-over-periods ``metric`` on- and
    off-policy, the rank under each (1 = best; ties share the best rank) and the change."""
    rows = interactive_rows(summary)
    rows = rows[(rows["metric"] == metric) & (rows["aggregate"] == "mean_over_periods")]
    if rows.empty:
        return pd.DataFrame()
    final = rows.groupby(["benchmark", "system", "protocol"])["step"].transform("max")
    last = rows[rows["step"] == final]
    wide = last.pivot_table(
        index=["benchmark", "system"], columns="protocol", values="value"
    ).dropna()
    if wide.empty or not set(PROTOCOLS) <= set(wide.columns):
        return pd.DataFrame()
    out = wide.rename(columns={ON_POLICY: "on_policy", OFF_POLICY: "off_policy"}).reset_index()
    for column in ("on_policy", "off_policy"):
        out[f"{column}_rank"] = (
            out.groupby("benchmark")[column].rank(ascending=False, method="min").astype(int)
        )
    out["rank_change"] = out["off_policy_rank"] - out["on_policy_rank"]
    return out.sort_values(["benchmark", "on_policy_rank", "system"], kind="stable").reset_index(
        drop=True
    )


def failure_bars_per_period(failures: pd.DataFrame) -> Figure:
    """One panel per run: per period, write / read / utilization stacked as shares of all
    questions (their sum is 1 - accuracy)."""
    runs = failures[["benchmark", "system", "protocol"]].drop_duplicates().to_records(index=False)
    columns = min(len(runs), 3)
    rows = int(np.ceil(len(runs) / columns))
    with rc_context(STYLE):
        figure = _new_figure(1.0 + 3.0 * rows)
        for ax, (benchmark, system, protocol) in zip(
            _panels(figure, len(runs), columns), runs, strict=False
        ):
            part = failures[
                (failures["benchmark"] == benchmark)
                & (failures["system"] == system)
                & (failures["protocol"] == protocol)
            ].sort_values("period")
            x = part["period"].to_numpy()
            bottom = np.zeros(len(part))
            for stage in STAGES:
                if stage not in part.columns:
                    continue
                heights = part[stage].fillna(0.0).to_numpy()
                ax.bar(x, heights, bottom=bottom, color=FAILURE_COLOURS[stage], width=0.7,
                       label=STAGE_NAMES[stage])  # fmt: skip
                bottom += heights
            ax.set_ylim(0, 1)
            ax.set_xticks(x)
            ax.set_xlabel("period")
            ax.set_ylabel("share of questions")
            label = system if protocol == ON_POLICY else f"{system} · replay"
            ax.set_title(f"{benchmark}: {label}", fontsize=11)
        handles, names = figure.axes[0].get_legend_handles_labels()
        figure.legend(handles, names, loc="outside lower center", ncols=3, frameon=False)
    return figure
