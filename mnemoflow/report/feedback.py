"""The learning-from-feedback part of the summary: curves per step, feedback rates, normalized
scores and on-policy vs off-policy, from the summary table alone (protocols other than ``qa``)."""

from __future__ import annotations

import pandas as pd

from mnemoflow.report.denominators import denominator_table

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


def feedback_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The feedback family's tables, shared by ``summary.md`` and the HTML report: score per step
    (benchmark, protocol, system, step columns), like / dislike / end rates per on-policy step,
    normalized scores, and each system's last-step score per protocol side by side."""
    runs = summary[summary["protocol"].isin(ORDER)]
    curves, rates, normalized, sides = [], [], [], []
    for benchmark, bench in runs.groupby("benchmark", sort=True):
        protocols = [p for p in ORDER if p in set(bench["protocol"])]
        main = bench[(bench["metric"] == MAIN) & (bench["aggregate"] == "micro")]
        for protocol in protocols:
            rows = main[main["protocol"] == protocol]
            if not rows.empty:
                curves.append(_per_step(rows).assign(benchmark=benchmark, protocol=protocol))
            if protocol != "on_policy":
                continue
            for metric, label in RATES:
                rated = bench[(bench["protocol"] == protocol) & (bench["metric"] == metric)]
                rated = rated[rated["step"] > 0]
                if not rated.empty:
                    table = _per_step(rated).assign(benchmark=benchmark, rate=label)
                    rates.append(table)
        scaled = bench[bench["aggregate"] == "normalized"]
        if not scaled.empty:
            table = scaled.pivot_table(
                index=["system", "protocol", "step"], columns="metric", values="value"
            ).reset_index()
            normalized.append(table.assign(benchmark=benchmark))
        if len(protocols) > 1:
            last = main[
                main["step"] == main.groupby(["system", "protocol"])["step"].transform("max")
            ]
            side = last.pivot_table(index="system", columns="protocol", values="value")
            side = side[[p for p in protocols if p in side.columns]].reset_index()
            sides.append(side.assign(benchmark=benchmark))
    return {
        "curves": _stack(curves, ["benchmark", "protocol"]),
        "rates": _stack(rates, ["benchmark", "rate"]),
        "normalized": _stack(normalized, ["benchmark"]),
        "protocols": _stack(sides, ["benchmark"]),
    }


def _stack(frames: list[pd.DataFrame], first: list[str]) -> pd.DataFrame:
    """Frames one under the other, the identifying columns first."""
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    return frame[first + [c for c in frame.columns if c not in first]]


def _part(frame: pd.DataFrame, **where: str) -> pd.DataFrame:
    """The rows of a stacked table matching ``where``, without the identifying columns."""
    if frame.empty:
        return frame
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column] == value
    rows = frame[mask].drop(columns=list(where)).dropna(axis=1, how="all")
    return rows.reset_index(drop=True)


def user_parse_failures(bench: pd.DataFrame) -> int:
    """Unparsed simulated-user replies, each counted once: every on-policy step's own dialogues,
    plus per system its training dialogues once (off_policy step 0, the stepwise batches together
    and train_performance each report the same training dialogues)."""
    rows = bench[bench["metric"] == "user_parse_failures"]
    live = rows[rows["protocol"] == "on_policy"]["value"].sum()
    per_protocol = (
        rows[rows["protocol"] != "on_policy"].groupby(["system", "protocol"])["value"].sum()
    )
    training = per_protocol.groupby(level="system").max().sum() if len(per_protocol) else 0.0
    return int(live + training)


DENOMINATOR_NOTE = (
    "At each run's last step, over the datasets scored by a judge: the mean per-item score over "
    "the items the judge scored, over all items (a judge that never gave a value at the bottom "
    "of its scale, as the main score counts it), and how many the judge did not score."
)


def denominators(bench: pd.DataFrame) -> pd.DataFrame:
    """The main score both ways at each (system, protocol)'s last step; empty for a benchmark
    without judged datasets."""
    return denominator_table(bench, MAIN, "micro")


def feedback_markdown(summary: pd.DataFrame) -> str:
    """Per benchmark: the main score per step and system for each protocol (``none`` beside the
    memory systems), like / dislike / end rates per step, normalized scores, and each system's
    last-step score per protocol side by side."""
    runs = summary[summary["protocol"].isin(ORDER)]
    if runs.empty:
        return ""
    tables = feedback_tables(summary)
    parts: list[str] = []
    for benchmark, bench in runs.groupby("benchmark", sort=True):
        protocols = [p for p in ORDER if p in set(bench["protocol"])]
        main = bench[(bench["metric"] == MAIN) & (bench["aggregate"] == "micro")]
        parts += [f"## {benchmark}: learning from feedback", ""]
        for protocol in protocols:
            rows = main[main["protocol"] == protocol]
            if rows.empty:
                continue
            n = int(rows["n"].max())
            parts += [f"### {benchmark} {protocol}: score per step ({n} questions)", ""]
            parts += _table(_part(tables["curves"], benchmark=benchmark, protocol=protocol))
            if protocol != "on_policy":
                continue
            for _, label in RATES:
                rated = _part(tables["rates"], benchmark=benchmark, rate=label)
                if not rated.empty:
                    parts += [f"{label} rate of the step's dialogues:", ""]
                    parts += _table(rated)
        normalized = _part(tables["normalized"], benchmark=benchmark)
        if not normalized.empty:
            parts += [f"### {benchmark}: normalized (official statistics)", ""]
            parts += _table(normalized)
        judged = denominators(bench)
        if not judged.empty:
            parts += [f"### {benchmark}: score over the judged items and over all", ""]
            parts += _table(judged)
            parts += [DENOMINATOR_NOTE, ""]
        side = _part(tables["protocols"], benchmark=benchmark)
        if not side.empty:
            parts += [f"### {benchmark}: last-step score per protocol", ""]
            parts += _table(side)
        failures = user_parse_failures(bench)
        if failures:
            parts += [f"Simulated-user replies that could not be parsed: {int(failures)}", ""]
    return "\n".join(parts)
