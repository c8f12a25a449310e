"""The feedback family through the real workflow (offline): a run of the synthetic feedback
benchmark with all four protocols, and that a batch_size edit re-plans only the steps it changes."""

from __future__ import annotations

import pandas as pd

from tests.workflow import planned_outputs, snakemake, workdir

OVERRIDE = """
run:
  benchmarks: [synthetic_feedback]
  systems: [none, bm25_message]
benchmarks:
  synthetic_feedback:
    loader: synthetic_feedback
    protocols: [off_policy, stepwise_off_policy, on_policy, train_performance]
    params: {{items: 6, seed: 3}}
    feedback: {{batch_size: {batch}, on_policy_steps: 2}}
"""


def test_feedback_run_then_a_batch_size_edit_replans_only_the_affected_steps(tmp_path):
    work = workdir(tmp_path)
    first = tmp_path / "batch3.yaml"
    first.write_text(OVERRIDE.format(batch=3))
    snakemake(work, configfiles=(work / "config.yaml", first))

    summary = pd.read_parquet(work / "results" / "summary.parquet")
    main = summary[(summary.metric == "item_value") & (summary["aggregate"] == "micro")]
    value = {(r.system, r.protocol, r.step): r.value for r in main.itertuples()}
    # 6 test items; off-policy memory holds every correction, `none` remembers nothing
    assert value[("bm25_message", "off_policy", 0)] == 1.0
    assert value[("none", "off_policy", 0)] == 0.0
    assert value[("bm25_message", "train_performance", 0)] == 1.0  # the 6 training items
    assert value[("none", "train_performance", 0)] == 0.0
    # stepwise: begin (nothing), then 3 of 6 dialogues, then all 6
    assert [value[("bm25_message", "stepwise_off_policy", k)] for k in (0, 1, 2)] == [0, 0.5, 1]
    assert [value[("none", "on_policy", k)] for k in (0, 1, 2)] == [0, 0, 0]
    assert value[("bm25_message", "on_policy", 0)] == 0.0
    assert value[("bm25_message", "on_policy", 2)] > 0.0
    rates = summary[(summary.metric == "dislike_rate") & (summary.protocol == "on_policy")]
    assert set(rates.step) == {1, 2}
    markdown = (work / "results" / "summary.md").read_text()
    assert "### synthetic_feedback on_policy: score per step (6 questions)" in markdown
    assert "### synthetic_feedback: last-step score per protocol" in markdown

    second = tmp_path / "batch4.yaml"
    second.write_text(OVERRIDE.format(batch=4))  # still 1 + ceil(6 / 4) = 3 stepwise steps
    planned = planned_outputs(snakemake(work, "-n", configfiles=(work / "config.yaml", second)))
    steps = sorted({p.rsplit("/", 1)[0] for p in planned if p.endswith("/scores.parquet")})
    assert steps == [
        f"results/synthetic_feedback/{s}/{p}/step{k}"
        for s in ("bm25_message", "none")
        for p in ("on_policy", "stepwise_off_policy")
        for k in (1, 2)
    ]
    assert not [p for p in planned if "train_dialogues" in p]
