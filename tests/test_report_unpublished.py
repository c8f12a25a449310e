"""Ours beside a paper without published numbers (report/unpublished.py), on a tiny summary."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.report.compare import ITEM_COLUMNS, Run
from mnemoflow.report.unpublished import check_spec, unpublished_cells

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


def test_a_spec_of_the_wrong_shape_is_one_line_naming_the_field():
    """``compare --preset`` reads the preset without the config schema: check_spec is what stands
    between a wrong shape and a TypeError deep in the comparison."""
    where = "configs/paper/x.yaml"
    cases = [  # (the key set, its value, the field the error names)
        ("plotted", {"mb_legal": {"figure": "Figure 10", "rows": ["BM25-S"]}}, "plotted.mb_legal"),
        ("plotted", {"mb_legal": "Figure 10"}, "plotted.mb_legal"),
        ("plotted", ["mb_legal"], "plotted"),
        ("protocols", "stepwise_off_policy", "protocols"),
    ]
    for key, value, field in cases:
        with pytest.raises(ConfigError) as caught:
            check_spec({**COMPARE, key: value}, where)
        assert str(caught.value).startswith(f"{where}: compare.{field}:"), field
    check_spec({**COMPARE, "protocols": ["interactive"]}, where)
