"""The learning-from-feedback part of the summary: curves per step, feedback rates, normalized
scores and on-policy vs off-policy, from the summary table alone (protocols other than ``qa``)."""

from __future__ import annotations

import pandas as pd

#: The main value of a feedback run: the mean per-item score (MemoryBench's summary value).
MAIN = "item_value"
RATES = (("like_rate", "like"), ("dislike_rate", "dislike"), ("end_rate", "ended"))
ORDER = ("off_policy", "stepwise_off_policy", "on_policy", "train_performance")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "–" if pd.isna(value) else f"{value:.3f}"
    return str(value)


def _table(frame: pd.DataFrame) -> list[str]:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return [header, rule, *body, ""]


def _per_step(rows: pd.DataFrame) -> pd.DataFrame:
    table = rows.pivot_table(index="system", columns="step", values="value", aggfunc="first")
    table.columns = [f"step {c}" for c in table.columns]
    return table.reset_index()


def feedback_markdown(summary: pd.DataFrame) -> str:
    """Per benchmark: the main score per step and system for each protocol (``none`` beside the
    memory systems), like / dislike / end rates per step, normalized scores, and each system's
    last-step score per protocol side by side."""
    runs = summary[summary["protocol"] != "qa"]
    if runs.empty:
        return ""
    parts: list[str] = []
    for benchmark, bench in runs.groupby("benchmark", sort=True):
        protocols = [p for p in ORDER if p in set(bench["protocol"])]
        parts += [f"## {benchmark}: learning from feedback", ""]
        main = bench[(bench["metric"] == MAIN) & (bench["aggregate"] == "micro")]
        for protocol in protocols:
            rows = main[main["protocol"] == protocol]
            if rows.empty:
                continue
            n = int(rows["n"].max())
            parts += [f"### {benchmark} {protocol}: score per step ({n} questions)", ""]
            parts += _table(_per_step(rows))
            for metric, label in RATES:
                rated = bench[(bench["protocol"] == protocol) & (bench["metric"] == metric)]
                if protocol == "on_policy":
                    rated = rated[rated["step"] > 0]
                if rated.empty or protocol != "on_policy":
                    continue
                parts += [f"{label} rate of the step's dialogues:", ""]
                parts += _table(_per_step(rated))
        normalized = bench[bench["aggregate"] == "normalized"]
        if not normalized.empty:
            table = normalized.pivot_table(
                index=["system", "protocol", "step"], columns="metric", values="value"
            ).reset_index()
            parts += [f"### {benchmark}: normalized (official statistics)", ""]
            parts += _table(table)
        if len(protocols) > 1:
            last = main[
                main["step"] == main.groupby(["system", "protocol"])["step"].transform("max")
            ]
            side = last.pivot_table(index="system", columns="protocol", values="value")
            side = side[[p for p in protocols if p in side.columns]].reset_index()
            parts += [f"### {benchmark}: last-step score per protocol", ""]
            parts += _table(side)
        failures = bench[bench["metric"] == "user_parse_failures"]["value"].sum()
        if failures:
            parts += [f"Simulated-user replies that could not be parsed: {int(failures)}", ""]
    return "\n".join(parts)
