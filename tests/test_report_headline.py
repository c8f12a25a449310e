"""The report's opening: one headline table per benchmark, the counters in diagnostics."""

from __future__ import annotations

import pandas as pd
import pytest

from mnemoflow.report.headline import (
    diagnostics_tables,
    headline_metrics,
    headline_tables,
    is_counter,
    is_headline,
)
from mnemoflow.report.summaries import add_labels, with_intervals

NO_JUDGEMENTS = pd.DataFrame(
    columns=["benchmark", "system", "protocol", "step", "metric", "question_id", "question_type"]
    + ["value"]
)


@pytest.mark.parametrize(
    "metric",
    ["accuracy", "j", "f1", "item_value", "memory_score", "session_recall_any@5", "ndcg_any@10"],
)
def test_scores_a_paper_reports_are_headline(metric):
    assert is_headline(metric) and not is_counter(metric)


@pytest.mark.parametrize(
    "metric",
    [
        "parse_failures",
        "judge_parse_failures",
        "memory_score_undefined",
        "evolution_unparsed",
        "recall_parse_failures",
        "upper_below_random",
        "random",
        "upper_bound",
        "accuracy:all",
        "accuracy:unscored",
        "section_changed",
    ],
)
def test_counters_are_not_headline(metric):
    assert not is_headline(metric) and is_counter(metric)


def test_failure_shares_belong_to_neither():
    # the diagnosis and feedback sections show them
    for metric in ("write_failure_rate", "undiagnosable_rate", "like_rate"):
        assert not is_headline(metric) and not is_counter(metric)


def test_headline_columns_keep_the_papers_order_then_retrieval():
    metrics = ["turn_evidence_recall", "f1", "parse_failures", "j", "accuracy:all"]
    assert headline_metrics(metrics) == ["j", "f1", "turn_evidence_recall"]


def _row(benchmark, system, protocol, step, metric, aggregate, value, n):
    return dict(
        benchmark=benchmark,
        system=system,
        protocol=protocol,
        step=step,
        metric=metric,
        aggregate=aggregate,
        value=value,
        n=n,
    )


@pytest.fixture
def scored():
    rows = [
        # static QA: two systems; the old step 0 must not show
        _row("locomo", "bm25", "qa", 0, "j", "micro", 0.1, 10),
        _row("locomo", "bm25", "qa", 1, "j", "micro", 0.8, 10),
        _row("locomo", "none", "qa", 1, "j", "micro", 0.2, 10),
        _row("locomo", "bm25", "qa", 1, "j:unscored", "micro", 2.0, 10),
        _row("locomo", "none", "qa", 1, "j:unscored", "micro", 0.0, 10),
        _row("locomo", "bm25", "qa", 1, "j:all", "micro", 0.64, 10),
        _row("locomo", "none", "qa", 1, "j:all", "micro", 0.2, 10),
        _row("locomo", "bm25", "qa", 1, "judge_parse_failures", "count", 2.0, 10),
        _row("locomo", "none", "qa", 1, "judge_parse_failures", "count", 0.0, 10),
        _row("locomo", "bm25", "qa", 1, "write_failure_rate", "micro", 0.5, 2),
        # AMemGym: micro (last period) and the mean over periods
        _row("amemgym", "awi", "interactive", 2, "accuracy", "micro", 0.75, 40),
        _row("amemgym", "awi", "interactive", 2, "accuracy", "mean_over_periods", 0.7, 120),
        _row("amemgym", "awi", "interactive", 2, "memory_score_undefined", "micro", 1.0, 40),
        _row("amemgym", "awi", "interactive", 2, "parse_failures", "micro", 3.0, 40),
    ]
    return add_labels(with_intervals(pd.DataFrame(rows), NO_JUDGEMENTS))


def test_one_headline_table_per_benchmark_best_first_with_intervals(scored):
    tables = headline_tables(scored)
    assert list(tables) == ["amemgym", "locomo"]
    locomo = tables["locomo"]
    assert list(locomo["run"]) == ["bm25", "none"]  # one protocol: the run is the system
    assert list(locomo["step"]) == [1, 1]
    assert locomo["j"].tolist() == [0.8, 0.2]
    # no judgements behind J: the Wilson interval of 8 of 10 (docs/report.md's example)
    assert locomo["j 95 % CI"].iloc[0] == "[0.490, 0.943]"
    # some answers went unscored: J over all items beside it
    assert locomo["j (all items)"].tolist() == [0.64, 0.2]
    assert "judge_parse_failures" not in locomo.columns
    assert "write_failure_rate" not in locomo.columns
    amemgym = tables["amemgym"]
    assert amemgym["accuracy (mean over periods)"].tolist() == [0.7]
    assert not any("parse" in c or "undefined" in c for c in amemgym.columns)


def test_no_all_items_column_when_every_item_was_scored(scored):
    scored = scored[scored["metric"] != "j:unscored"]
    assert "j (all items)" not in headline_tables(scored)["locomo"].columns


def test_counters_go_to_diagnostics(scored):
    tables = diagnostics_tables(scored)
    locomo = tables["locomo"].set_index("run")
    assert locomo.loc["bm25", "judge_parse_failures"] == 2.0
    assert locomo.loc["bm25", "j:unscored"] == 2.0
    assert "j" not in locomo.columns and "write_failure_rate" not in locomo.columns
    amemgym = tables["amemgym"].set_index("run")
    assert amemgym.loc["awi", "memory_score_undefined"] == 1.0
    assert amemgym.loc["awi", "parse_failures"] == 3.0


def test_a_published_mean_sits_beside_ours(scored):
    cells = pd.DataFrame(
        [
            # one question type's published value is not the headline's (all questions)
            dict(system="awi", protocol="interactive", period="mean", metric="accuracy")
            | dict(published=0.9, paper="amemgym", table="t2", row="AWI", aggregate="type:x"),
            dict(system="awi", protocol="interactive", period="mean", metric="accuracy")
            | dict(published=0.41, paper="amemgym", table="t2", row="AWI", aggregate="mean"),
            dict(system="", protocol="interactive", period="mean", metric="accuracy")
            | dict(published=0.5, paper="amemgym", table="t2", row="unpaired", aggregate="mean"),
        ]
    )
    tables = headline_tables(scored, cells)
    assert tables["amemgym"]["accuracy (published)"].tolist() == [0.41]
    assert "j (published)" not in tables["locomo"].columns
    assert "accuracy (published)" not in headline_tables(scored)["amemgym"].columns
