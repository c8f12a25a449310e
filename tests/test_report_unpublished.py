"""Ours beside a paper without published numbers (report/unpublished.py), on a tiny summary."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mnemoflow.report.compare import ITEM_COLUMNS, Run
from mnemoflow.report.unpublished import unpublished_cells

COMPARE = {"published": None, "paper": "amemgym", "table": "self_evolution", "missing": "no table",
           "metrics": ["accuracy"]}  # fmt: skip


def summary(steps: int) -> pd.DataFrame:
    rows = [
        {"benchmark": "amemgym_v1", "system": "awi", "protocol": "interactive", "step": k,
         "metric": "accuracy", "aggregate": aggregate, "value": 0.5 + 0.1 * k, "n": 20}
        for k in range(steps) for aggregate in ("micro", "mean_over_periods")
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_every_step_of_a_mean_over_periods_says_which_periods_it_is_over():
    """``--all``: the mean over periods 0..k of each step is its own cell; only the last step's
    is the experiment's ``mean`` (as without --all), the others name their periods."""
    run = Run(Path("."), summary(3), pd.DataFrame(columns=ITEM_COLUMNS))
    cells = unpublished_cells(run, COMPARE, [("awi", "AWI")], every_step=True)
    assert cells["period"].tolist() == ["mean 0-0", "mean 0-1", "mean"]
    assert cells["ours"].round(3).tolist() == [0.5, 0.6, 0.7]
    last = unpublished_cells(run, COMPARE, [("awi", "AWI")])
    assert last[["period", "ours"]].round(3).values.tolist() == [["mean", 0.7]]
