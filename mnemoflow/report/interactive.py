"""The interactive family's report (AMemGym): scores per period, failures per period, and the
on- vs off-policy ranking, computed from the summary and diagnosis tables only.

- Per period: overall accuracy and memory score of each run (system · protocol), plus the mean
  over periods, AMemGym's reported number.
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
