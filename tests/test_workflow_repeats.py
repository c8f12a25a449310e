"""``repeats: N`` in the workflow: repeat 0 is the run as it always was, repeat k a mirror under
results/seed{S}/ whose sampling roles send their own seed; the summary shows mean ± sd across seeds.
"""

import json
import math
import threading

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer, original_body
from tests.workflow import TINY, planned_outputs, snakemake, workdir

pytestmark = pytest.mark.slow

KEY = "sk-mnemoflowtest-repeats-0123456789"


def _write(tmp_path, name, config):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def test_repeats_1_plans_exactly_what_a_run_without_repeats_plans(tmp_path):
    wd = workdir(tmp_path)
    before = sorted(planned_outputs(snakemake(wd, "--dry-run")))
    one = _write(tmp_path, "one.yaml", {"repeats": 1})
    assert sorted(planned_outputs(snakemake(wd, "--dry-run", configfiles=(TINY, one)))) == before
    assert not any("seed" in path for path in before)


def test_two_seeds_sample_anew_and_the_summary_shows_mean_and_sd(tmp_path, monkeypatch):
    """The agent samples at temperature 0.7 from a test server whose reply depends on the seed it
    is sent: repeat 0 (no seed of its own, as always) quotes its context, repeat 1 (seed 14)
    knows nothing. The two repeats' answers differ, their accuracies too, and the summary's
    mean and sd are those of the two."""
    seen: list = []
    lock = threading.Lock()

    def reply(body):
        body = original_body(body)
        with lock:
            seen.append(body.get("seed"))
        if body.get("seed") == 14:
            return "I do not know."
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        return " ".join(prompt.split())

    monkeypatch.setenv("MNEMOFLOW_TEST_KEY", KEY)
    with OpenAITestServer(reply=reply, api_key=KEY) as server:
        agent = {
            "base_url": server.base_url,
            "model": "mnemoflow-test",
            "api_key_env": "MNEMOFLOW_TEST_KEY",
            "temperature": 0.7,
            "max_tokens": 4096,
        }
        override = _write(
            tmp_path,
            "repeats.yaml",
            {
                "repeats": 2,
                "models": {"agent": agent},
                "allow_offline_roles": ["judge", "user", "memory_writer", "embedder"],
                "run": {"benchmarks": ["synthetic"], "systems": ["bm25_message"]},
                "benchmarks": {"synthetic": {"shards": 1, "params": {"periods": 1}}},
            },
        )
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")
        snakemake(wd, configfiles=(TINY, override), targets=("results/summary.md",))

    assert set(seen) == {None, 14}  # repeat 0's requests as always, repeat 1's seeded
    shard = "synthetic/bm25_message/qa/step0/shard0"
    first = pd.read_parquet(wd / "results" / shard / "answers.parquet")
    second = pd.read_parquet(wd / "results" / "seed14" / shard / "answers.parquet")
    assert list(first["question_id"]) == list(second["question_id"])  # the same questions
    assert (second["response"] == "I do not know.").all()
    assert (first["response"] != second["response"]).all()
    # repeat 1 (config.yaml's seed 13, + 1) mirrors every file of the chain, not the prepared data
    results = wd / "results"
    chain = {p.relative_to(results) for p in results.glob("synthetic/*/**/*") if p.is_file()}
    mirror = {p.relative_to(results / "seed14") for p in results.glob("seed14/**/*") if p.is_file()}
    assert {p for p in chain if p.parts[1] != "prepared"} == mirror
    # the judge keeps its own seed in every repeat
    settings = [
        json.loads((wd / "results" / r / shard / "judge.json").read_text()) for r in ("", "seed14")
    ]
    assert settings[0] == settings[1]

    accuracy = []
    for root in (wd / "results", wd / "results" / "seed14"):
        scores = pd.read_parquet(root / "synthetic/bm25_message/qa/step0/scores.parquet")
        row = scores[(scores["metric"] == "accuracy") & (scores["aggregate"] == "micro")]
        accuracy.append(float(row["value"].item()))
    assert accuracy[0] > accuracy[1]  # "I do not know" is right only where the gold abstains
    summary = pd.read_parquet(wd / "results" / "summary.parquet")
    summary = summary[summary["metric"] == "accuracy"].set_index("aggregate")
    assert summary.loc["micro", "value"] == pytest.approx(accuracy[0])  # repeat 0's rows
    assert summary.loc["seeds_mean:micro", "value"] == pytest.approx(sum(accuracy) / 2)
    sd = (accuracy[0] - accuracy[1]) / math.sqrt(2)  # the sample sd of two values
    assert summary.loc["seeds_sd:micro", "value"] == pytest.approx(sd)
    assert summary.loc["seeds_mean:micro", "n"] == 2
    text = (wd / "results" / "summary.md").read_text()
    mean = sum(accuracy) / 2
    assert "## Across seeds" in text
    assert f"| {accuracy[0]:.3f} | [" in text and f"| {mean:.3f} ± {sd:.3f} (2 seeds) |" in text
