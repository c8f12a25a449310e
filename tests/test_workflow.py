"""The workflow end to end on a tiny config: plan, run, no-op rerun, param change, cached rerun."""

import pandas as pd
import pytest
import yaml

from tests.workflow import TINY, copy_run, ledgers, planned_outputs, snakemake, workdir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tiny_run, tmp_path_factory):
    """A copy of the session's real run of the tiny config (conftest.tiny_run), shared by the
    tests that inspect or rerun it."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("run") / "wd")


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> str:
    """One dry run, with every job's command and inputs printed, of the tiny config from
    nothing: the planning tests read the same log."""
    wd = workdir(tmp_path_factory.mktemp("plan"))
    return snakemake(wd, "--dry-run", "--printshellcmds", "--forceall", "--verbose")


def test_dry_run_plans_the_step_chain(plan):
    outputs = planned_outputs(plan)
    # 2 systems x 2 steps x 2 shards of ingest / answer / judge, a score per step, one summary.
    snapshots = [o for o in outputs if o.endswith("/memory")]
    assert len(snapshots) == 8
    assert "results/synthetic/bm25_message/qa/step1/shard0/memory" in snapshots
    assert sum(o.endswith("/scores.parquet") for o in outputs) == 4
    assert "results/summary.parquet" in outputs


def test_step_k_depends_on_step_k_minus_1(plan):
    ingest_step1 = [
        block
        for block in plan.split("rule ingest:")
        if "output: results/synthetic/none/qa/step1/shard1/memory" in block
    ]
    assert ingest_step1, "step 1 ingest planned"
    assert "results/synthetic/none/qa/step0/shard1/memory" in ingest_step1[0].split("output:")[0]


def test_real_run_writes_all_outputs(finished):
    summary = pd.read_parquet(finished / "results/summary.parquet")
    micro = summary[(summary["metric"] == "accuracy") & (summary["aggregate"] == "micro")]
    assert set(micro.system) == {"none", "bm25_message"} and set(micro.step) == {0, 1}
    last = micro[micro.step == 1].set_index("system")["value"]
    assert last["bm25_message"] > last["none"]
    assert "accuracy (micro) per step" in (finished / "results/summary.md").read_text()
    # every memory's footprint: retrieval latency per question, snapshot size per episode
    footprint = summary[
        summary["metric"].isin(["retrieval_ms_p95", "memory_kb", "retrieval_ms_cold"])
    ]
    sizes = footprint.set_index(["system", "step", "metric"])["value"]
    assert sizes["bm25_message", 1, "memory_kb"] > sizes["bm25_message", 0, "memory_kb"] > 0
    assert sizes["bm25_message", 1, "retrieval_ms_p95"] > 0
    assert sizes["bm25_message", 1, "retrieval_ms_cold"] > 0
    assert "retrieval p95 ms" in (finished / "results/summary.md").read_text()
    for name in ("ingest.ledger.json", "answers.ledger.json", "judgements.ledger.json"):
        assert len(ledgers(finished, name)) == 8
    assert all(p.stat().st_size > 0 for p in finished.glob("results/logs/**/*.log"))


def test_second_invocation_has_nothing_to_do(finished):
    log = snakemake(finished, "--dry-run")
    assert "Nothing to be done" in log


def test_changing_one_system_parameter_replans_only_that_system(finished, tmp_path):
    override = yaml.safe_load(TINY.read_text())
    override["systems"] = {"bm25_message": {"type": "bm25_message", "top_k": 2}}
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(override))
    log = snakemake(finished, "--dry-run", configfiles=(TINY, path))
    outputs = [o for o in planned_outputs(log) if o.startswith("results/synthetic/")]
    assert outputs, "the changed system is re-planned"
    assert all("/bm25_message/" in o for o in outputs), outputs
    assert not any("/none/" in o for o in outputs)
    # top_k is a query-time parameter: answering re-runs, ingestion does not.
    assert sum(o.endswith("answers.parquet") for o in outputs) == 4
    assert not any(o.endswith("/memory") for o in outputs), outputs


def test_a_writer_binding_change_re_runs_nothing_when_no_system_writes_with_it(finished, tmp_path):
    override = yaml.safe_load(TINY.read_text())
    override["models"]["memory_writer"] = {"backend": "offline", "temperature": 0.7}
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(override))
    log = snakemake(finished, "--dry-run", configfiles=(TINY, path))
    # Only the report, which prints the whole config; no ingest, answer, judge or score job.
    planned = {o for o in planned_outputs(log) if o.startswith("results/")}
    assert planned == {"results/report.html", "results/report"}, planned


def test_a_role_played_by_another_model_re_renders_the_summary(finished, tmp_path):
    """summary.md names the model of each role, so the summarize rule re-runs when one changes
    (the writer's temperature above re-renders nothing: the table shows backend and model)."""
    override = yaml.safe_load(TINY.read_text())
    override["models"]["judge"] = {"base_url": "http://127.0.0.1:9/v1", "model": "another-judge"}
    override["allow_offline_roles"] = ["agent", "memory_writer", "embedder"]
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(override))
    planned = set(planned_outputs(snakemake(finished, "--dry-run", configfiles=(TINY, path))))
    assert "results/summary.md" in planned
    assert not any(o.endswith("answers.parquet") for o in planned), planned  # the agent is as was
    assert any(o.endswith("judgements.parquet") for o in planned)


def test_forced_rerun_of_answer_and_judge_makes_no_new_model_calls(finished):
    snakemake(finished, "--forcerun", "answer", "judge")
    for name in ("answers.ledger.json", "judgements.ledger.json"):
        for ledger in ledgers(finished, name):
            totals = ledger["totals"]
            assert totals["calls"] > 0 and totals["cache_hits"] == totals["calls"], ledger
