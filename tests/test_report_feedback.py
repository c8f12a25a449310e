"""The feedback family in summary.md and the HTML report: one set of tables for both."""

from __future__ import annotations

import pandas as pd

from mnemoflow.report.feedback import feedback_markdown, feedback_tables


def _row(system, protocol, step, metric, value, aggregate="micro", n=10):
    return {
        "benchmark": "fb",
        "system": system,
        "protocol": protocol,
        "step": step,
        "metric": metric,
        "aggregate": aggregate,
        "value": value,
        "n": n,
    }


SUMMARY = pd.DataFrame(
    [
        _row("none", "on_policy", 0, "item_value", 0.0),
        _row("none", "on_policy", 1, "item_value", 0.0),
        _row("bm25", "on_policy", 0, "item_value", 0.0),
        _row("bm25", "on_policy", 1, "item_value", 0.6),
        _row("bm25", "on_policy", 1, "like_rate", 0.25),
        _row("bm25", "off_policy", 0, "item_value", 0.8),
        _row("none", "off_policy", 0, "item_value", 0.0),
        _row("bm25", "qa", 0, "accuracy", 0.5),  # another family: not a feedback row
    ]
)


def test_curves_rates_and_protocols_side_by_side():
    tables = feedback_tables(SUMMARY)
    curves = tables["curves"]
    on = curves[curves["protocol"] == "on_policy"].set_index("system")
    assert on.loc["bm25", ["step 0", "step 1"]].tolist() == [0.0, 0.6]
    assert on.loc["none", ["step 0", "step 1"]].tolist() == [0.0, 0.0]
    assert tables["rates"][["rate", "system", "step 1"]].values.tolist() == [["like", "bm25", 0.25]]
    side = tables["protocols"].set_index("system")
    assert side.loc["bm25", ["off_policy", "on_policy"]].tolist() == [0.8, 0.6]
    assert tables["normalized"].empty


def test_markdown_renders_the_same_tables():
    text = feedback_markdown(SUMMARY)
    assert "### fb on_policy: score per step (10 questions)" in text
    assert "| bm25 | 0.000 | 0.600 |" in text
    assert "like rate of the step's dialogues:" in text
    assert "| bm25 | 0.800 | 0.600 |" in text  # last step: off-policy, on-policy


def test_html_report_has_the_feedback_section(tmp_path):
    from mnemoflow.report.html import collect, render_html

    page = render_html(collect(SUMMARY, pd.DataFrame(), [], {}))
    assert "Learning from feedback (per step)" in page
    assert "Feedback per on-policy step" in page
    assert "On-policy vs off-policy" in page


def test_unparsed_user_replies_of_the_training_dialogues_are_counted_once():
    # bm25's generated training dialogues hold 2 unparsed replies: off_policy step 0 and
    # train_performance score all of them, stepwise its batches (1 + 1); on-policy step 1 adds 1
    # of its own. The summary must say 3, not 2 + 1 + 1 + 2 + 1 = 7.
    rows = [
        _row("bm25", "off_policy", 0, "item_value", 0.5),
        _row("bm25", "off_policy", 0, "user_parse_failures", 2.0),
        _row("bm25", "stepwise_off_policy", 1, "user_parse_failures", 1.0),
        _row("bm25", "stepwise_off_policy", 2, "user_parse_failures", 1.0),
        _row("bm25", "train_performance", 0, "user_parse_failures", 2.0),
        _row("bm25", "on_policy", 1, "item_value", 0.5),
        _row("bm25", "on_policy", 1, "user_parse_failures", 1.0),
        _row("none", "off_policy", 0, "user_parse_failures", 0.0),
    ]
    text = feedback_markdown(pd.DataFrame(rows))
    assert "Simulated-user replies that could not be parsed: 3\n" in text
