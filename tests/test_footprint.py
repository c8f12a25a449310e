"""A memory's footprint (eval.static_qa.footprint): retrieval latency percentiles and snapshot size,
as SCORES rows, and where the report shows them."""

from __future__ import annotations

import pandas as pd
import pytest

from mnemoflow.data.tables import ANSWERS, FOOTPRINT_METRICS
from mnemoflow.eval.static_qa.footprint import footprint_scores
from mnemoflow.report.headline import FOOTPRINT_LABELS, diagnostics_tables, headline_tables

RUN = {"benchmark": "b", "system": "s", "protocol": "qa", "step": 0}


def answers(seconds, cold=()):
    """Warm retrievals ``seconds``, and each episode's first (``cold``)."""
    rows = [{**RUN, "question_id": f"q{i}", "retrieval_s": s} for i, s in enumerate(seconds)]
    rows += [{**RUN, "question_id": f"c{i}", "retrieval_cold_s": s} for i, s in enumerate(cold)]
    return pd.DataFrame(rows, columns=ANSWERS.names)


def snapshot(root, sizes):
    for episode, size in sizes.items():
        (root / episode).mkdir(parents=True)
        (root / episode / "messages.jsonl").write_bytes(b"x" * size)
    (root / ".snakemake_timestamp").write_text("")  # not part of the memory
    return root


def test_percentiles_and_size_worked_example(tmp_path):
    frame = answers([0.001, 0.002, 0.003, 0.004, 0.100], cold=[2.0, 6.0])
    shards = [
        snapshot(tmp_path / "shard0", {"e1": 1024}),
        snapshot(tmp_path / "shard1", {"e2": 3072}),
    ]
    scores = footprint_scores(frame, shards).set_index("metric")
    assert scores.loc["retrieval_ms_p50", "value"] == pytest.approx(3.0)
    # linear interpolation between the 4th and 5th of 5: 4 + 0.8 x (100 - 4) ms
    assert scores.loc["retrieval_ms_p95", "value"] == pytest.approx(80.8)
    assert scores.loc["retrieval_ms_p50", "n"] == 5  # the episodes' first retrievals apart
    assert scores.loc["retrieval_ms_cold", "value"] == pytest.approx(4000.0)
    assert scores.loc["retrieval_ms_cold", "n"] == 2
    assert scores.loc["memory_kb", "value"] == pytest.approx(2.0)  # (1 + 3) KiB / 2 episodes
    assert scores.loc["memory_kb", "n"] == 2
    assert set(scores["aggregate"]) == {"micro"} and set(scores["system"]) == {"s"}


def test_a_retrieval_log_times_nothing_and_no_answers_give_no_rows(tmp_path):
    logged = footprint_scores(answers([None, None]), [])
    assert logged.empty
    assert footprint_scores(answers([]), [snapshot(tmp_path, {"e": 10})]).empty


def test_the_headline_table_shows_the_footprint_and_diagnostics_do_not(tmp_path):
    frame = footprint_scores(answers([0.002, 0.004]), [snapshot(tmp_path, {"e": 2048})])
    accuracy = pd.DataFrame([{**RUN, "metric": "accuracy", "aggregate": "micro", "value": 0.5,
                              "n": 2}])  # fmt: skip
    scored = pd.concat([accuracy, frame], ignore_index=True)
    scored = scored.assign(ci_low=float("nan"), ci_high=float("nan"), ci_method="")
    table = headline_tables(scored)["b"].iloc[0]
    assert table["retrieval p50 (ms)"] == pytest.approx(3.0)
    assert table["snapshot (KiB / episode)"] == pytest.approx(2.0)
    assert "b" not in diagnostics_tables(scored)  # no counters: the footprint is not one


def test_every_footprint_row_has_its_headline_column():
    assert set(FOOTPRINT_LABELS) == set(FOOTPRINT_METRICS)
