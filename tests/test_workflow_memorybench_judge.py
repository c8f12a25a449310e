"""One MemoryBench benchmark through the real workflow (offline) with ``scoring: judge``: a tiny
Locomo-0 release (tests/memorybench_release.py), training dialogues generated with the rule-based
user (correct iff the judge score > 0.5), off-policy answers scored by the judge protocol, and
its counted failures in the two-denominator rows; and a task set under ``scoring: judge`` with
``normalize: {}`` planned with the shipped 0-1 statistics."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.data.memorybench import registered_files
from tests.memorybench_release import locomo_release
from tests.shared_data import shared_file
from tests.workflow import planned_outputs, snakemake, workdir

pytestmark = pytest.mark.slow


def test_memorybench_locomo_scored_by_the_judge_protocol(tmp_path):
    configs = shared_file("memorybench") / "configs" / "datasets"  # absent: skip
    spec = locomo_release(tmp_path, configs)
    (tmp_path / "work").mkdir()
    work = workdir(tmp_path / "work")
    override = work / "judge.json"
    run = {"benchmarks": ["mb"], "systems": ["bm25_message"]}
    override.write_text(json.dumps({"run": run, "benchmarks": {"mb": spec}}))
    snakemake(work, configfiles=(work / "config.yaml", override))

    results = work / "results" / "mb"
    dialogues = pd.read_parquet(results / "bm25_message" / "feedback" / "train_dialogues.parquet")
    users = dialogues[(dialogues.role == "user") & (dialogues.implicit_action != "")]
    # the rule-based user's verdicts come from the judge: the official texts, like or dislike
    assert set(users.implicit_action) <= {"like", "dislike"} and len(users) >= 1
    step = results / "bm25_message" / "off_policy" / "step0"
    judgements = pd.read_parquet(step / "judgements.parquet")
    assert set(judgements.metric) == {"llm_judge_score"}
    assert judgements.parse_ok.all()  # the offline judge always answers in its format
    assert judgements.value.between(0, 1).all() and len(judgements) == 2
    scores = pd.read_parquet(step / "scores.parquet")
    rows = {(r.metric, r.aggregate): (r.value, r.n) for r in scores.itertuples()}
    assert rows[("llm_judge_score:unscored", "micro")] == (0.0, 2)
    mean = float(judgements.value.mean())
    assert rows[("llm_judge_score:all", "micro")] == (mean, 2)
    assert rows[("item_value", "micro")] == (mean, 2)


def test_a_judge_scored_task_set_normalizes_with_the_shipped_statistics_by_default(tmp_path):
    configs = shared_file("memorybench") / "configs" / "datasets"  # absent: skip
    work = workdir(tmp_path)
    override = work / "judge.json"
    spec = {
        "loader": "memorybench",
        "source": {"path": str(tmp_path / "release")},
        "set": "task:Short-Short",
        "configs": str(configs),
        "scoring": "judge",
        "protocols": ["off_policy"],
        "normalize": {},
    }
    # the startup check finds every file the set reads in the release folder (a plan reads none)
    for name in registered_files(spec):
        (tmp_path / "release" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "release" / name).write_text("{}")
    run = {"benchmarks": ["mb"], "systems": ["bm25_message"]}
    override.write_text(json.dumps({"run": run, "benchmarks": {"mb": spec}}))
    log = snakemake(work, "-n", "-p", configfiles=(work / "config.yaml", override))
    assert "results/mb/bm25_message/off_policy/step0/normalized.parquet" in planned_outputs(log)
    assert "data/memorybench/final_evaluate_summary_wo_details.judge.json" in log
