"""results/summary.md: LoCoMo shows both J and the official F1 per category."""

from __future__ import annotations

import pandas as pd

from mnemoflow.report.summary import summary_markdown


def _row(system, metric, aggregate, value):
    keys = {"benchmark": "locomo", "system": system, "protocol": "qa", "step": 0}
    return {**keys, "metric": metric, "aggregate": aggregate, "value": value, "n": 10}


def test_locomo_per_category_tables_give_j_and_f1():
    summary = pd.DataFrame(
        [
            _row("bm25_message", "j", "micro", 0.5),
            _row("bm25_message", "j", "type:temporal", 0.25),
            _row("bm25_message", "f1", "micro", 0.4),
            _row("bm25_message", "f1", "type:temporal", 0.125),
        ]
    )
    text = summary_markdown(summary)
    j_table = text.split("### locomo: j per question type")[1].split("###")[0]
    f1_table = text.split("### locomo: f1 per question type")[1]
    assert "| bm25_message | 0.250 |" in j_table
    assert "| bm25_message | 0.125 |" in f1_table


def test_f1_alone_is_shown_once():
    summary = pd.DataFrame(
        [_row("none", "f1", "micro", 0.1), _row("none", "f1", "type:single-hop", 0.2)]
    )
    assert summary_markdown(summary).count("f1 per question type") == 1
