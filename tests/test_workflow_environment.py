"""AMemGym environment generation in the workflow (offline backend): one generate_user job per
persona, the environment rule gathering data.json and the generation report, the interactive
protocol running on it; then a knob read only by the `answers` stage re-runs the user jobs, every
other stage is taken from its checkpoint and no earlier stage's task reaches the model."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from mnemoflow.data.amemgym import read_environment
from mnemoflow.environment.assemble import validate_data
from tests.workflow import REPO, snakemake, workdir

pytestmark = pytest.mark.slow

BENCH = "amemgym_generated"
GENERATE = {
    "method": "llm",
    "preset": "v1.base",
    "num_user_profiles": 2,
    "num_periods": 1,
    "num_questions": 2,
}
OVERRIDE = {
    "models": {"embedder": {"backend": "offline"}},
    "run": {"benchmarks": [BENCH], "systems": ["native"]},
    "benchmarks": {BENCH: {"systems": ["native"], "generate": GENERATE}},
}
ENV = f"results/{BENCH}/environment"
#: The model tasks of each stage (the stage modules' ChatRequest tasks).
EARLY_TASKS = {
    "env-profile",
    "env-questions",
    "env-merge-types",
    "env-unify-choices",
    "env-initial-state",
    "env-state-updates",
    "env-events",
}
LATE_TASKS = {"env-init-queries", "env-update-queries", "env-query-check", "env-query-refine"}


def setup(tmp_path, **knobs):
    wd = workdir(tmp_path)
    override = wd / "generate.yaml"
    spec = json.loads(json.dumps(OVERRIDE))
    spec["benchmarks"][BENCH]["generate"].update(knobs)
    override.write_text(yaml.safe_dump(spec))
    return wd, override


def plan(wd, *configfiles, env=None):
    """``mnemoflow plan --json`` of the run in ``wd``."""
    files = [str(f) for f in configfiles]
    out = subprocess.run(
        [sys.executable, "-m", "mnemoflow.cli", "plan", "--json", "--directory", str(wd),
         "--configfile", *files],
        capture_output=True, text=True, timeout=300,
        env={**(env or os.environ), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def tasks(ledger_path):
    ledger = json.loads(ledger_path.read_text())
    return {key.split("/", 1)[1] for key in ledger["by_role_task"]}


def test_dry_run_plans_one_generation_job_per_persona_and_the_gather(tmp_path):
    wd, override = setup(tmp_path)
    log = snakemake(wd, "--dry-run", configfiles=[override])
    assert log.count("rule generate_user:") == 2
    assert f"{ENV}/users/0.json" in log and f"{ENV}/users/1.json" in log
    assert log.count("rule environment:") == 1
    assert "rule generate_amemgym:" not in log  # the procedural rule does not claim data.json
    # v1.base: num_periods 1 -> periods 0 and 1, each a dialogues job of the one system
    assert log.count("rule dialogues:") == 2


def test_generation_then_a_late_knob_reuses_earlier_stages_and_the_report_shows_it(tmp_path):
    wd, override = setup(tmp_path)
    planned = plan(wd, override)
    snakemake(wd, configfiles=[override], targets=[f"{ENV}/data.json"])
    # the plan played the chain offline for these two personas, as the jobs then did
    recorded = {"generator_high": [0, 0], "generator_low": [0, 0]}
    for user in (0, 1):
        ledger = json.loads((wd / ENV / "users" / f"{user}.ledger.json").read_text())
        for key, entry in ledger["by_role_task"].items():
            recorded[key.split("/")[0]][0] += entry["calls"]
            recorded[key.split("/")[0]][1] += entry["tokens_in"]
    assert planned["jobs_by_rule"]["generate_user"] == 2 and not planned["unplanned"]
    for role, (calls, tokens_in) in recorded.items():
        assert planned["by_role"][role]["calls"] == pytest.approx(calls), role
        assert planned["by_role"][role]["tokens_in"] == pytest.approx(tokens_in, rel=0.25), role
    data = json.loads((wd / ENV / "data.json").read_text())
    validate_data(data)
    users = read_environment(wd / ENV / "data.json")
    assert len(users) == 2
    assert [len(u.periods) for u in users] == [2, 2]
    assert [len(u.questions) for u in users] == [2, 2]
    # v1.base pads every question to min_state_variants = 4 answer choices (or more)
    assert min(len(q.choices) for u in users for q in u.questions) >= 4
    report = pd.read_parquet(wd / ENV / "generation_report.parquet")
    assert (
        list(report.groupby("user")["stage"].apply(list))
        == [["profile", "questions", "schema", "initial_state", "periods", "answers", "queries"]]
        * 2
    )
    assert not report["reused"].any() and not report["failed"].any()
    assert (report["calls"] > 0).all()
    first_answers = [u.questions[0].choices for u in users]

    # min_state_variants is read by the answers stage only; this run goes on to the report
    wd, override = setup(tmp_path, min_state_variants=5)
    log = snakemake(wd, configfiles=[override])
    assert log.count("rule generate_user:") == 2
    report = pd.read_parquet(wd / ENV / "generation_report.parquet")
    recomputed = sorted(set(report.loc[~report["reused"], "stage"]))
    assert recomputed == ["answers"]
    assert report.groupby("stage")["calls"].sum().drop("answers").sum() == 0
    for user in (0, 1):
        called = tasks(wd / ENV / "users" / f"{user}.ledger.json")
        assert called and called <= {"env-answers", "env-answer-check", "env-answer-refine"}
        assert not called & (EARLY_TASKS | LATE_TASKS)
    users = read_environment(wd / ENV / "data.json")
    assert min(len(q.choices) for u in users for q in u.questions) >= 5
    assert [u.questions[0].choices for u in users] != first_answers
    summary = (wd / "results" / "summary.md").read_text()
    assert f"## {BENCH}: environment generation (2 users, 0 failed)" in summary
    # stage | users | calls | validation_failures | refinements | reused | failed
    assert "| profile | 2 | 0 | 0 | 0 | 2 | 0 |" in summary
    assert "| queries | 2 | 0 | 0 | 0 | 2 | 0 |" in summary
    page = (wd / "results" / "report.html").read_text()
    assert "Environment generation" in page and "No user failed." in page


def test_the_openai_override_file_plans_the_v1_base_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # a dry run calls no model
    wd = workdir(tmp_path)
    override = REPO / "configs" / "amemgym_generate_openai.yaml"
    log = snakemake(wd, "--dry-run", configfiles=[override])
    # v1.base: 20 users, 10 update periods -> 11 periods x 2 systems x 4 shards of dialogues
    assert log.count("rule generate_user:") == 20
    assert "results/amemgym_v1_base/environment/users/19.json" in log
    assert log.count("rule dialogues:") == 11 * 2 * 4
    # priced before it exists, and without the key: the plan calls no model
    monkeypatch.delenv("OPENAI_API_KEY")
    planned = plan(wd, override, env=os.environ)
    assert planned["jobs_by_rule"]["generate_user"] == 20 and not planned["unplanned"]
    assert planned["by_role"]["generator_low"]["calls"] > 20 * 10  # several calls per question
    assert planned["by_role"]["agent"]["calls"] > 0 and planned["usd"] > 0
    stand_in = [r for r in planned["runs"] if r["system"] == "native"]
    assert stand_in and all("stand-in environment" in " ".join(r["notes"]) for r in stand_in)
