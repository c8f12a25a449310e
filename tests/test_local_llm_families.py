"""The three families on the real local model, through the workflow (docs/local-llm.md).

configs/local-llm.yaml, pointed at the session's served SmolLM2 (tests/conftest.py), with a tiny
layer: static QA (synthetic), MemoryBench feedback (synthetic_feedback, on-policy, the simulated
user on the model with ``structured_output: auto``: llama-cpp-python's server refuses json_schema
with HTTP 500 and takes json_object with the schema) and AMemGym interactive (one user of the
tiny fixture environment, periods 0 and 1). The run must finish; every chat role's replies must
come from the served model; parse failures are counted (a 135M model misparses), never guessed;
a forced rerun of every model-calling job is all cache hits. It prints the run's time and each
task's requests, re-asks and parse failures (docs/local-llm.md records them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow.ops import local_llm
from tests.amemgym_fixtures import TINY_BENCHMARK, write_one_user
from tests.workflow import MODEL_RULES, SMALL_SYNTHETIC, on_policy_feedback, snakemake, workdir

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CHAT_ROLES = ("agent", "judge", "user")  # the roles configs/local-llm.yaml binds to the server
#: As small as each family allows: 2 users, 1 period, few questions, one memory system.
LAYER = {
    "run": {
        "benchmarks": ["synthetic", "synthetic_feedback", "amemgym_tiny"],
        "systems": ["bm25_message"],
    },
    "benchmarks": {
        "synthetic": SMALL_SYNTHETIC["benchmarks"]["synthetic"],  # 2 users, 1 period
        "synthetic_feedback": on_policy_feedback(batch_size=2),
        "amemgym_tiny": {
            **TINY_BENCHMARK,
            "systems": ["bm25_message"],
            "interactive": {"num_rounds_init": 1, "num_rounds_update": 1},
        },
    },
}


@pytest.fixture(scope="module")
def families_run(local_llm_server, tmp_path_factory):
    """The run, its ledgers, its time, then a forced rerun of its model-calling jobs."""
    wd = workdir(tmp_path_factory.mktemp("local_llm_families"))
    config = yaml.safe_load((ROOT / "configs" / "local-llm.yaml").read_text(encoding="utf-8"))
    for binding in config["models"].values():
        if binding.get("backend") == "openai":
            binding["base_url"] = local_llm.base_url(local_llm_server)
    write_one_user(wd)
    files = (wd / "local-llm.yaml", wd / "tiny.yaml")
    files[0].write_text(yaml.safe_dump(config), encoding="utf-8")
    files[1].write_text(json.dumps(LAYER), encoding="utf-8")
    started = time.perf_counter()
    snakemake(wd, targets=("results/summary.md",), configfiles=files, timeout=900)
    elapsed = time.perf_counter() - started
    first = {str(p.relative_to(wd)): json.loads(p.read_text()) for p in ledger_paths(wd)}
    snakemake(wd, "--forcerun", *MODEL_RULES, targets=tuple(first), configfiles=files)
    rerun = {str(p.relative_to(wd)): json.loads(p.read_text()) for p in ledger_paths(wd)}
    print(f"\nlocal-llm families: {elapsed:.0f} s; {parse_failure_rates(first)}")
    return wd, first, rerun


def ledger_paths(wd: Path) -> list[Path]:
    return sorted(wd.glob("results/**/*.ledger.json"))


def parse_failure_rates(every: dict[str, dict]) -> dict[str, str]:
    """role/task -> requests, re-asks and parse failures (after the re-asks) over the run: what
    docs/local-llm.md records."""
    counts: dict[str, list[int]] = {}
    for ledger in every.values():
        for key, entry in ledger["by_role_task"].items():
            if key.split("/")[0] in CHAT_ROLES and entry["calls"]:
                seen = counts.setdefault(key, [0, 0, 0])
                seen[0] += entry["calls"]
                seen[1] += entry["reasks"]
                seen[2] += entry["parse_failures"]
    return {
        key: f"{calls} requests, {reasks} re-asks, {failed} parse failures"
        for key, (calls, reasks, failed) in sorted(counts.items())
    }


def frames(wd: Path, pattern: str) -> pd.DataFrame:
    paths = sorted(wd.glob(f"results/{pattern}"))
    assert paths, pattern
    return pd.concat(pd.read_parquet(p) for p in paths)


def test_every_family_runs_to_completion_on_the_served_model(families_run):
    wd, first, _ = families_run
    summary = pd.read_parquet(wd / "results" / "summary.parquet")
    assert {"synthetic", "synthetic_feedback", "amemgym_tiny"} <= set(summary.benchmark)
    called = {
        key.split("/")[0]
        for ledger in first.values()
        for key, entry in ledger["by_role_task"].items()
        if entry["calls"] - entry["cache_hits"]
    }
    assert set(CHAT_ROLES) <= called
    for path, ledger in first.items():
        played = {r: m for r, m in ledger["models"].items() if r in CHAT_ROLES}
        assert set(played.values()) <= {local_llm.MODEL_ALIAS}, path  # never offline
        assert ledger["totals"]["errors"] == 0, path
    answers = frames(wd, "synthetic/**/answers.parquet")
    assert set(answers.model) == {local_llm.MODEL_ALIAS}


def test_the_simulated_user_ends_on_json_object_with_its_schema(families_run):
    wd, first, _ = families_run
    user = [
        ledger
        for path, ledger in first.items()
        if path.startswith("results/synthetic_feedback/")
        and any(k.startswith("user/") and e["calls"] for k, e in ledger["by_role_task"].items())
    ]
    assert user
    for ledger in user:
        assert ledger["structured_output"]["user"] == "json_object"
    # the job that met the refusal counts the one step down (json_schema -> json_object)
    assert sum(ledger["totals"]["structured_output_fallbacks"] for ledger in user) >= 1
    assert max(ledger["totals"]["structured_output_fallbacks"] for ledger in user) == 1
    models = (wd / "results" / "summary.md").read_text().split("## Models", 1)[1]
    row = next(line for line in models.splitlines() if line.startswith("| user"))
    assert "json_object" in row


def test_parse_failures_are_counted_never_guessed(families_run):
    wd, first, _ = families_run
    judged = frames(wd, "synthetic/**/judgements.parquet")
    failed = ~judged.parse_ok
    assert judged.value[failed].isna().all()  # no verdict invented for a reply that did not parse
    judge_failures = sum(
        entry["parse_failures"]
        for path, ledger in first.items()
        if path.startswith("results/synthetic/")
        for key, entry in ledger["by_role_task"].items()
        if key.startswith("judge/")
    )
    assert judge_failures == int(failed.sum())
    # AMemGym: a checkpoint reply that did not parse is scored wrong, as the reference does
    scores = frames(wd, "amemgym_tiny/**/question_scores.parquet")
    replies = frames(wd, "amemgym_tiny/**/checkpoint_replies.parquet")
    assert len(scores) == len(replies) > 0
    assert (scores.correct[~scores.parse_ok.astype(bool)] == 0.0).all()
    assert int((~replies.parse_ok).sum()) == int((~scores.parse_ok.astype(bool)).sum())


def test_a_rerun_is_all_cache_hits(families_run):
    _, first, rerun = families_run
    assert set(rerun) == set(first)
    for path, ledger in rerun.items():
        totals = ledger["totals"]
        assert totals["cache_hits"] == totals["calls"], path
        assert totals["tokens_in"] == totals["tokens_out"] == 0, path
        assert (
            totals["structured_output_fallbacks"]
            == (first[path]["totals"]["structured_output_fallbacks"])
        ), path
