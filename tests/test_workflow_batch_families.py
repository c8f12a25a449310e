"""A tiny run of the feedback and of the interactive family with the judge in Batch-API mode gives
the online run's tables.

Feedback: a MemoryBench Locomo-0 release (tests/memorybench_release.py) scored by the judge
protocol, its training dialogues and the on-policy step 1's live one with the rule-based user
(whose verdicts are the judge's: asked online, the next turn depends on them), every step's
answers scored by the judge through the test server's Batch API. Interactive: AMemGym asks no
judge, so a judge in Batch-API mode changes nothing there (no batch, the same tables); its agent
converses, so Batch-API mode for the agent is refused when the workflow is parsed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer, original_body
from tests.amemgym_fixtures import TINY_BENCHMARK, write_one_user
from tests.answering_model import answer
from tests.memorybench_release import locomo_release
from tests.shared_data import shared_file
from tests.workflow import ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

SUMMARY = ("results/summary.parquet",)  # the report (plots) calls no model
#: What differs between any two runs: wall time and where a reply came from.
TIMING = ["latency_s", "retrieval_s", "retrieval_cold_s", "cache_hit"]


def scoring_judge(body: dict) -> str:
    """The judge protocol's JSON verdict, its score a function of the prompt (some answers pass
    the rule-based user's bar of 5, some do not)."""
    prompt = original_body(body)["messages"][-1]["content"]
    score = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest(), 16) % 11
    return json.dumps({"score": score, "reason": "graded by the test server"})


def tables(wd: Path, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    out = {}
    for name in names:
        paths = sorted(wd.glob(f"results/**/{name}"))
        assert paths, name
        frame = pd.concat(pd.read_parquet(p) for p in paths)
        out[name] = frame.drop(columns=TIMING, errors="ignore").reset_index(drop=True)
    return out


def feedback_run(tmp_path: Path, spec: dict, judge: dict) -> Path:
    tmp_path.mkdir()
    wd = workdir(tmp_path)
    override = wd / "override.json"
    models = {"judge": judge, "embedder": {"backend": "offline"}}
    config = {
        "allow_offline_roles": ["agent", "user", "memory_writer", "embedder"],
        "run": {"benchmarks": ["mb"], "systems": ["bm25_message"]},
        "benchmarks": {"mb": spec},
        "models": models,
    }
    override.write_text(json.dumps(config))
    snakemake(wd, targets=SUMMARY, configfiles=(wd / "config.yaml", override))
    return wd


def test_feedback_run_with_the_judge_in_batch_api_mode_gives_the_online_tables(tmp_path):
    spec = locomo_release(tmp_path, shared_file("memorybench") / "configs" / "datasets")
    spec["protocols"] = ["off_policy", "on_policy"]
    spec["feedback"] = {**spec["feedback"], "on_policy_steps": 1}
    with OpenAITestServer(reply=scoring_judge) as server:
        judge = {"base_url": server.base_url, "model": "judge-test"}
        online = feedback_run(tmp_path / "online", spec, judge)
        asked_online = server.stats().paths["chat"]
        server.reset()
        batch = {**judge, "batch": True, "batch_poll_s": 0.05}
        batched = feedback_run(tmp_path / "batch", spec, batch)
        created, asked = server.batch_api.created, server.stats().paths["chat"]
    names = ("train_dialogues.parquet", "dialogues.parquet", "answers.parquet")
    names += ("judgements.parquet", "scores.parquet", "question_scores.parquet")
    first, second = tables(online, names), tables(batched, names)
    for name in names:
        pd.testing.assert_frame_equal(first[name], second[name], obj=name)
    judged = first["judgements.parquet"]
    assert len(judged) == 2 * 3 and judged.parse_ok.all()  # off-policy step 0, on-policy 0 and 1
    dialogues = first["dialogues.parquet"]
    assert (dialogues.protocol == "on_policy").any()  # step 1's live dialogue
    # every job asked the judge as often; the scoring went through batches, the dialogues'
    # verdicts (train_dialogues, the on-policy step 1's live dialogue) online
    counts = {name: judge_counts(wd) for name, wd in (("online", online), ("batch", batched))}
    assert counts["online"].keys() == counts["batch"].keys()
    for job, (calls, hits, _) in counts["online"].items():
        assert counts["batch"][job][:2] == (calls, hits), job
    assert asked_online == sum(calls - hits for calls, hits, _ in counts["online"].values())
    in_batches = sum(b for _, _, b in counts["batch"].values())
    assert created >= 1 and in_batches >= 2
    assert (
        asked == sum(c - h - b for c, h, b in counts["batch"].values()) == asked_online - in_batches
    )
    talk = next(
        v for job, v in counts["batch"].items() if job.endswith("train_dialogues.ledger.json")
    )
    assert talk[0] >= 1 and talk[2] == 0
    for led in ledgers(batched, "step.ledger.json"):
        assert bool(led.get("batch_ids")) == bool(led["totals"]["batch_calls"])


def judge_counts(wd: Path) -> dict[str, tuple[int, int, int]]:
    """ledger -> the judge's (calls, cache hits, batch calls) in it."""
    out = {}
    for path in sorted(wd.glob("results/**/*.ledger.json")):
        entries = [
            e
            for key, e in json.loads(path.read_text())["by_role_task"].items()
            if key.startswith("judge/")
        ]
        if entries:
            counts = (sum(e[n] for e in entries) for n in ("calls", "cache_hits", "batch_calls"))
            out[str(path.relative_to(wd))] = tuple(counts)
    return out


OFFLINE = {"backend": "offline"}
AMEMGYM = {
    "allow_offline_roles": ["memory_writer", "embedder"],  # native writes none; bag-of-words
    "run": {"benchmarks": ["amemgym_tiny"], "systems": ["native"]},
    "benchmarks": {"amemgym_tiny": TINY_BENCHMARK},
}


def interactive_override(wd: Path, server: OpenAITestServer, **judge) -> Path:
    endpoint = {"base_url": server.base_url, "model": "qwen3"}
    models = {"agent": endpoint, "user": endpoint, "judge": {**endpoint, **judge}}
    override = wd / "override.json"
    override.write_text(json.dumps({**AMEMGYM, "models": models | {"embedder": OFFLINE}}))
    return override


def test_interactive_run_with_the_judge_in_batch_api_mode_gives_the_online_tables(tmp_path):
    """AMemGym asks no judge: the judge's Batch-API mode reaches no job of the run, so switching
    it on after an online run plans nothing again (the tables are the online run's) and a run
    made with it from the start makes no batch."""
    wd = workdir(tmp_path)
    write_one_user(wd)
    with OpenAITestServer(reply=answer) as server:
        online = interactive_override(wd, server)
        snakemake(wd, targets=SUMMARY, configfiles=(wd / "config.yaml", online))
        assert server.stats().paths["chat"] > 0
        server.reset()
        batch = interactive_override(wd, server, batch=True, batch_poll_s=0.05)
        log = snakemake(wd, "-n", targets=SUMMARY, configfiles=(wd / "config.yaml", batch))
        assert "Nothing to be done" in log
        assert server.batch_api.created == 0 and server.stats().paths["chat"] == 0
    replies = pd.read_parquet(next(wd.glob("results/**/checkpoint_replies.parquet")))
    assert len(replies) > 0 and replies.parse_ok.all()
    called = {
        key.split("/")[0]
        for led in ledgers(wd, "*.ledger.json")
        for key, entry in led["by_role_task"].items()
        if entry["calls"]
    }
    assert "agent" in called and "judge" not in called


def test_the_interactive_agent_in_batch_api_mode_is_refused_at_parse_time(tmp_path):
    wd = workdir(tmp_path)
    write_one_user(wd)
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    models = {"agent": {**endpoint, "batch": True}, "user": endpoint}
    override = wd / "override.json"
    override.write_text(json.dumps({**AMEMGYM, "models": models | {"embedder": OFFLINE}}))
    refused = r"models.agent.batch: Batch-API mode runs in the rules answer, .*dialogues"
    with pytest.raises(AssertionError, match=refused):
        snakemake(wd, "-n", configfiles=(wd / "config.yaml", override))
