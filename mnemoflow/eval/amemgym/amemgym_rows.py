"""An AMemGym scorer's rows (``eval.amemgym.amemgym_score.score_replies``) as the workflow's tables.

The scorer reports per period and a mean over periods; a run's step k is period k, so its SCORES
rows are that period's values and the mean over periods 0..k (at the last step, the reference's
reported number), and its DIAGNOSIS rows split period k into correct / write / read /
utilization failures.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mnemoflow.data.tables import DIAGNOSIS, MEMORY_FAILURES, SCORES

#: The on-policy protocol's name (``protocols.interactive.PROTOCOL``); other runs are replays.
ON_POLICY = "interactive"

#: Aggregate names of the summary rows of an interactive run.
PER_PERIOD = "micro"  # the step's own period (for the memory score: the mean over users)
MEAN_OVER_PERIODS = "mean_over_periods"  # mean over periods 0..step (the reference's number)


def _period(value: Any) -> int | None:
    """A row's period, or None for the mean row (null, NaN, a negative number or a word)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def summary_rows(
    per_period: pd.DataFrame, keys: dict[str, Any], counts: dict[int, int]
) -> pd.DataFrame:
    """The scorer's rows (metric, period, value[, n]) as SCORES rows of step ``keys['step']``:
    that period's value (aggregate ``micro``) and the scorer's mean row (``mean_over_periods``)."""
    step = int(keys["step"])
    rows = []
    for row in per_period.to_dict("records"):
        period = _period(row.get("period"))
        if period is not None and period != step:
            continue
        n = row.get("n")
        if n is None or (isinstance(n, float) and math.isnan(n)):
            n = counts.get(period, 0) if period is not None else sum(counts.values())
        rows.append(
            {
                **keys,
                "metric": str(row["metric"]),
                "aggregate": MEAN_OVER_PERIODS if period is None else PER_PERIOD,
                "value": float(row["value"]),
                "n": int(n),
            }
        )
    return pd.DataFrame(rows, columns=SCORES.names)


def evolution_rows(records: pd.DataFrame, keys: dict[str, Any]) -> pd.DataFrame:
    """Self-evolution as SCORES rows of step ``keys['step']`` (none when the system does not
    evolve): ``section_changed``, the share of users whose section the period's evolution
    changed (``micro``) and over periods 0..step (``mean_over_periods``); ``evolution_unparsed``,
    the number of rewrites whose reply never parsed (the section was kept), likewise."""
    if records.empty:
        return pd.DataFrame(columns=SCORES.names)
    step = int(keys["step"])
    upto = records[records["period"] <= step]
    now = upto[upto["period"] == step]
    rows = []
    for metric, column, share in (
        ("section_changed", "changed", True),
        ("evolution_unparsed", "parse_ok", False),
    ):
        for aggregate, part in ((PER_PERIOD, now), (MEAN_OVER_PERIODS, upto)):
            if part.empty:
                continue
            values = part[column].astype(bool)
            value = float(values.mean()) if share else float((~values).sum())
            rows.append({**keys, "metric": metric, "aggregate": aggregate, "value": value,
                         "n": len(part)})  # fmt: skip
    return pd.DataFrame(rows, columns=SCORES.names)


#: Scorer metric -> failure of the DIAGNOSIS table.
FAILURES = {"accuracy": "correct", **{f"{kind}_failure_rate": kind for kind in MEMORY_FAILURES}}


def diagnosis_rows(
    per_period: pd.DataFrame, keys: dict[str, Any], counts: dict[int, int]
) -> pd.DataFrame:
    """Period ``keys['step']``: correct (accuracy) + write + read + utilization, adding up to 1.

    DIAGNOSIS has no protocol column, so an off-policy run's rows name the system
    ``<system>@replay``.
    """
    system = keys["system"] + ("" if keys["protocol"] == ON_POLICY else "@replay")
    step = int(keys["step"])
    rows = []
    for row in per_period.to_dict("records"):
        if _period(row.get("period")) != step or row["metric"] not in FAILURES:
            continue
        rows.append(
            {
                "benchmark": keys["benchmark"],
                "system": system,
                "step": step,
                "question_type": "all",
                "failure": FAILURES[row["metric"]],
                "rate": float(row["value"]),
                "n": int(counts.get(step, 0)),
            }
        )
    return pd.DataFrame(rows, columns=DIAGNOSIS.names)
