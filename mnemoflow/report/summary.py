"""The run summary: every run's scores in one table, and a readable Markdown rendering of it."""

from __future__ import annotations

import pandas as pd

from mnemoflow.data.tables import SUMMARY


def summarize(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate score tables in a stable order (benchmark, system, protocol, step)."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=SUMMARY.names)
    frame = pd.concat(frames, ignore_index=True)[SUMMARY.names]
    return frame.sort_values(
        ["benchmark", "protocol", "system", "step", "metric", "aggregate"], kind="stable"
    ).reset_index(drop=True)


def _fmt(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.3f}"


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = [
        "| " + " | ".join(_fmt(v) if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


def summary_markdown(summary: pd.DataFrame) -> str:
    """Final-step accuracy per benchmark and system, per question type, and accuracy per step."""
    if summary.empty:
        return "# mnemoflow summary\n\nNo scores.\n"
    acc = summary[summary["metric"] == "accuracy"]
    last = acc[acc["step"] == acc.groupby(["benchmark", "system"])["step"].transform("max")]
    parts = ["# mnemoflow summary", ""]
    for benchmark, rows in last.groupby("benchmark", sort=True):
        main = rows.pivot_table(
            index="system", columns="aggregate", values="value", aggfunc="first"
        )
        ordered = [c for c in ("micro", "macro") if c in main.columns]
        ordered += sorted(c for c in main.columns if c not in ordered)
        main = main[ordered].reset_index()
        main.columns = ["system", *[c.replace("type:", "") for c in ordered]]
        n = int(rows.loc[rows["aggregate"] == "micro", "n"].max())
        step = int(rows["step"].max())
        parts += [f"## {benchmark}: accuracy at the last step ({step}), {n} questions", ""]
        parts += [_markdown(main), ""]
        steps = acc[(acc["benchmark"] == benchmark) & (acc["aggregate"] == "micro")]
        if steps["step"].nunique() > 1:
            per_step = steps.pivot_table(index="system", columns="step", values="value")
            per_step.columns = [f"step {c}" for c in per_step.columns]
            parts += [f"### {benchmark}: accuracy (micro) per step", ""]
            parts += [_markdown(per_step.reset_index()), ""]
    failures = summary[summary["metric"] == "parse_failures"]
    if not failures.empty and failures["value"].sum() > 0:
        parts += [f"Judge replies that could not be parsed: {int(failures['value'].sum())}", ""]
    return "\n".join(parts) + "\n"
