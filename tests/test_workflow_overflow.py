"""Prompts over the context window: with `overflow: fail` (the default) their items fail and the
run goes on; with `overflow: abort` a run whose plan has such prompts is refused at the start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mnemoflow.data.tables import read_table
from tests.workflow import REPO, TINY, snakemake, workdir

pytestmark = pytest.mark.slow

#: With a 160-token window and max_tokens 50, 12 of the 30 reader prompts of this run do not fit
#: (the plan counts them; bm25_message's prompts carry memories, none's do not).
WINDOW = 160
OVERFLOWING = 12


def override(tmp_path, base_url: str, **agent) -> str:
    path = tmp_path / f"override-{len(list(tmp_path.glob('override-*')))}.yaml"
    binding = {"base_url": base_url, "model": "m", "context_window": WINDOW, "max_tokens": 50}
    config = {
        "run": {"benchmarks": ["synthetic"], "systems": ["none", "bm25_message"]},
        "benchmarks": {"synthetic": {"shards": 1, "params": {"periods": 1}}},
        "models": {"agent": {**binding, **agent}},
        "allow_offline_roles": ["memory_writer", "embedder", "judge"],
    }
    path.write_text(json.dumps(config))
    return str(path)


def planned_overflows(wd, configs) -> dict[str, int]:
    command = [sys.executable, "-m", "mnemoflow.cli", "plan", "--json", "--directory", str(wd),
               "--configfile", str(TINY), *configs]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["overflows"]


def test_overflowing_items_fail_and_the_run_goes_on(tmp_path):
    from mnemoflow.testing.openai_server import OpenAITestServer

    (tmp_path / "run").mkdir()
    wd = workdir(tmp_path / "run")
    with OpenAITestServer() as server:
        configs = [override(tmp_path, server.base_url)]
        assert planned_overflows(wd, configs) == {"agent": OVERFLOWING}
        snakemake(wd, configfiles=(TINY, *configs))
        sent = sum(server.stats().answered.values())

    failed, answered, calls, misses = 0, 0, 0, 0
    for path in sorted(wd.glob("results/**/answers.ledger.json")):  # one per system and shard
        ledger = json.loads(path.read_text())
        reasons = ledger.get("failed_questions", {})
        assert all("> context_window 160; not sent" in r for r in reasons.values())
        assert ledger["totals"]["overflow_failures"] == len(ledger.get("failed_items", {}))
        failed += len(reasons)
        calls += ledger["totals"]["calls"]
        misses += ledger["totals"]["calls"] - ledger["totals"]["cache_hits"]
        answers = read_table(path.with_name("answers.parquet"), "answers")
        answered += len(answers)
        assert (answers[answers.question_id.isin(list(reasons))]["response"] == "").all()
        judged = read_table(path.with_name("judgements.parquet"), "judgements")
        missed = judged.question_id.isin(list(reasons))
        unscored, scored = judged[missed], judged[~missed]
        assert len(unscored) == len(reasons) and (unscored["raw_reply"] == "").all()
        assert unscored["value"].isna().all() and not unscored["parse_ok"].any()
        assert scored["value"].notna().all() and scored["parse_ok"].all()
    assert failed == OVERFLOWING and answered == 30
    # the overflowing prompts were never asked; of the others only the cache misses reached
    # the endpoint
    assert calls == 30 - OVERFLOWING and sent == misses

    summary = read_table(wd / "results/summary.parquet", "summary")
    micro = summary[summary["aggregate"] == "micro"]
    counted = micro[micro["metric"] == "accuracy:unscored"]
    assert counted["value"].sum() == OVERFLOWING
    text = (wd / "results/summary.md").read_text()
    assert f"{OVERFLOWING} items failed: a prompt did not fit" in text
    assert text.count("| question ") == OVERFLOWING
    page = (wd / "results/report.html").read_text()
    assert '<section id="failed-items">' in page
    assert f"{OVERFLOWING} items failed: a prompt did not fit" in page


def test_overflow_abort_with_planned_overflows_is_refused_at_the_start(tmp_path):
    (tmp_path / "run").mkdir()
    wd = workdir(tmp_path / "run")
    configs = [override(tmp_path, "http://127.0.0.1:9/v1", overflow="abort")]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
               str(wd), "-n", "--configfile", str(TINY), *configs]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert (
        "config models.agent.overflow: abort, and the plan has prompts over the context window "
        f"(agent {OVERFLOWING})" in done.stdout + done.stderr
    )
    assert not (wd / "results").exists()
