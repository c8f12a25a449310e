"""Scores of an interactive run as summary rows: the step's own period, the running mean, the
diagnosis split, and summary.md's per-period tables (worked numbers)."""

from __future__ import annotations

import pandas as pd

from mnemoflow.data.tables import DIAGNOSIS, SCORES, to_arrow
from mnemoflow.eval.amemgym.amemgym_rows import diagnosis_rows, summary_rows
from mnemoflow.report.summary import summary_markdown

KEYS = {"benchmark": "amem", "system": "rag", "protocol": "interactive"}

#: What score_replies returns per period (``period`` None: the mean over periods 0..1).
PER_PERIOD = pd.DataFrame(
    [
        ("accuracy", 0, 0.75),
        ("accuracy", 1, 0.25),
        ("accuracy", None, 0.5),
        ("memory_score", 0, 0.6),
        ("memory_score", 1, 0.2),
        ("memory_score", None, 0.4),
        ("write_failure_rate", 1, 0.375),
        ("read_failure_rate", 1, 0.125),
        ("utilization_failure_rate", 1, 0.25),
    ],
    columns=["metric", "period", "value"],
)


def test_summary_rows_keep_the_steps_period_and_the_mean_over_periods():
    rows = summary_rows(PER_PERIOD, {**KEYS, "step": 1}, {0: 4, 1: 4})
    to_arrow(rows, SCORES)  # valid SCORES rows
    got = {(r.metric, r.aggregate): (r.value, r.n) for r in rows.itertuples()}
    assert got == {
        ("accuracy", "micro"): (0.25, 4),
        ("accuracy", "mean_over_periods"): (0.5, 8),
        ("memory_score", "micro"): (0.2, 4),
        ("memory_score", "mean_over_periods"): (0.4, 8),
        ("write_failure_rate", "micro"): (0.375, 4),
        ("read_failure_rate", "micro"): (0.125, 4),
        ("utilization_failure_rate", "micro"): (0.25, 4),
    }
    assert set(rows.step) == {1}


def test_diagnosis_rows_of_a_period_add_up_to_one():
    rows = diagnosis_rows(PER_PERIOD, {**KEYS, "step": 1}, {0: 4, 1: 4})
    to_arrow(rows, DIAGNOSIS)
    rates = dict(zip(rows.failure, rows.rate, strict=True))
    assert rates == {"correct": 0.25, "write": 0.375, "read": 0.125, "utilization": 0.25}
    assert sum(rates.values()) == 1.0
    replay = diagnosis_rows(PER_PERIOD, {**KEYS, "protocol": "interactive_replay", "step": 1}, {})
    assert set(replay.system) == {"rag@replay"}


def test_summary_markdown_shows_accuracy_and_memory_score_per_period():
    frames = [summary_rows(PER_PERIOD, {**KEYS, "step": k}, {0: 4, 1: 4}) for k in (0, 1)]
    text = summary_markdown(pd.concat(frames, ignore_index=True))
    assert "## amem: overall accuracy per period" in text
    assert "| system | protocol | period 0 | period 1 | mean |" in text
    assert "| rag | interactive | 0.750 | 0.250 | 0.500 |" in text
    assert "## amem: memory score per period" in text
    assert "| rag | interactive | 0.600 | 0.200 | 0.400 |" in text


def interactive_summary() -> pd.DataFrame:
    """Two systems, both protocols, two periods; memory scores chosen so replay swaps ranks."""
    memory = {  # (system, protocol) -> (period 0, period 1, mean)
        ("native", "interactive"): (0.6, 0.4, 0.5),
        ("rag", "interactive"): (0.4, 0.2, 0.3),
        ("native", "interactive_replay"): (0.3, 0.1, 0.2),
        ("rag", "interactive_replay"): (0.5, 0.3, 0.4),
    }
    frames = []
    for (system, protocol), (p0, p1, mean) in memory.items():
        keys = {"benchmark": "amem", "system": system, "protocol": protocol}
        per_period = pd.DataFrame(
            [
                ("memory_score", 0, p0),
                ("memory_score", 1, p1),
                ("memory_score", None, mean),
                ("accuracy", 0, 0.5),
                ("accuracy", 1, 0.25),
                ("accuracy", None, 0.375),
                ("write_failure_rate", 1, 0.5),
                ("read_failure_rate", 1, 0.125),
                ("utilization_failure_rate", 1, 0.125),
            ],
            columns=["metric", "period", "value"],
        )
        frames += [summary_rows(per_period, {**keys, "step": k}, {0: 4, 1: 4}) for k in (0, 1)]
    return pd.concat(frames, ignore_index=True)


def test_rank_table_shows_the_on_versus_off_policy_rank_change():
    from mnemoflow.report.interactive import rank_table

    ranks = rank_table(interactive_summary())
    got = {
        r.system: (r.on_policy, r.off_policy, r.on_policy_rank, r.off_policy_rank, r.rank_change)
        for r in ranks.itertuples()
    }
    assert got == {"native": (0.5, 0.2, 1, 2, 1), "rag": (0.3, 0.4, 2, 1, -1)}


def test_failure_table_per_period_stacks_to_one_minus_accuracy():
    from mnemoflow.report.interactive import failure_table

    table = failure_table(interactive_summary())
    row = table[(table.system == "rag") & (table.protocol == "interactive") & (table.period == 1)]
    values = row[["accuracy", "write", "read", "utilization"]].iloc[0].tolist()
    assert values == [0.25, 0.5, 0.125, 0.125]
    assert sum(values[1:]) == 1 - values[0]


def test_html_report_has_the_interactive_section(tmp_path):
    from mnemoflow.report.html import collect, render_html

    data = collect(interactive_summary(), pd.DataFrame(), [], {})
    page = render_html(data)
    assert "Interactive memory (per period)" in page
    assert "On- vs off-policy ranking" in page
    assert [f.name for f in data.figures if f.section == "interactive"] == ["interactive-failures"]


def baseline_summary(below_in_period_1: float = 0.0) -> pd.DataFrame:
    """Systems none and native, two periods. Random 0.25 throughout; upper bound 0.30 in period
    0 (gap 0.05 < 0.1: not meaningful) and 0.75 in period 1 (mean 0.525)."""
    accuracy = {"none": (0.25, 0.25, 0.25), "native": (0.5, 0.75, 0.625)}
    memory = {"none": (0.0, 0.0, 0.0), "native": (5.0, 1.0, 3.0)}
    frames = []
    for system in ("none", "native"):
        per_period = pd.DataFrame(
            [
                *(("accuracy", p, v) for p, v in zip((0, 1, None), accuracy[system], strict=True)),
                *(
                    ("memory_score", p, v)
                    for p, v in zip((0, 1, None), memory[system], strict=True)
                ),
                ("random", 0, 0.25),
                ("random", 1, 0.25),
                ("random", None, 0.25),
                ("upper_bound", 0, 0.30),
                ("upper_bound", 1, 0.75),
                ("upper_bound", None, 0.525),
                ("upper_below_random", 0, 0.0),
                ("upper_below_random", 1, below_in_period_1),
                ("upper_below_random", None, below_in_period_1),
            ],
            columns=["metric", "period", "value"],
        )
        keys = {"benchmark": "amem", "system": system, "protocol": "interactive"}
        frames += [summary_rows(per_period, {**keys, "step": k}, {0: 4, 1: 4}) for k in (0, 1)]
    return pd.concat(frames, ignore_index=True)


def test_summary_markdown_shows_random_upper_bound_and_marks_scores_not_meaningful():
    text = summary_markdown(baseline_summary())
    assert "## amem: random and upper bound per period" in text
    assert "| runs | baseline | period 0 | period 1 | mean |" in text
    assert "| all | random | 0.250 | 0.250 | 0.250 |" in text
    assert "| all | upper bound | 0.300 | 0.750 | 0.525 |" in text
    assert "| all | upper bound - random | 0.050 | 0.500 | 0.275 |" in text
    assert (
        "| all | (user, period) pairs with upper bound < random | 0.000 | 0.000 | 0.000 |" in text
    )
    assert "| system | protocol | period 0 | period 1 | mean | not meaningful |" in text
    assert "| native | interactive | 5.000 | 1.000 | 3.000 | period 0 |" in text
    assert "| none | interactive | 0.000 | 0.000 | 0.000 | period 0 |" in text
    assert "not meaningful: the periods where upper bound - random < 0.1" in text
    # the baselines table comes between accuracy and the memory score
    order = ["overall accuracy per period", "random and upper bound", "memory score per period"]
    assert sorted(order, key=text.index) == order


def test_a_pair_with_upper_bound_below_random_marks_its_period_and_the_mean():
    text = summary_markdown(baseline_summary(below_in_period_1=1.0))
    assert (
        "| all | (user, period) pairs with upper bound < random | 0.000 | 1.000 | 1.000 |" in text
    )
    assert "| native | interactive | 5.000 | 1.000 | 3.000 | period 0, period 1, mean |" in text


def test_runs_with_different_baselines_get_a_row_each():
    from mnemoflow.report.interactive import baseline_table

    rows = baseline_summary()
    moved = (rows["system"] == "none") & (rows["metric"] == "upper_bound")
    table = baseline_table(rows.assign(value=rows["value"].where(~moved, 0.9)))
    upper = table[table["baseline"] == "upper bound"]
    assert sorted(upper["runs"]) == ["native · interactive", "none · interactive"]
    assert table[table["baseline"] == "random"]["runs"].tolist() == ["all"]


def test_html_report_shows_baselines_and_the_not_meaningful_mark():
    from mnemoflow.report.html import collect, render_html

    data = collect(baseline_summary(), pd.DataFrame(), [], {})
    assert data.interactive["memory_score"]["not meaningful"].tolist() == ["period 0", "period 0"]
    page = render_html(data)
    assert "Random and upper bound per period" in page
    assert "<b>not meaningful</b>" in page
