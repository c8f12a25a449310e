"""The workflow against an OpenAI-compatible endpoint (the local test server): the real client path.

The agent and judge roles are bound to the server by a config override; the API key lives in an
environment variable and must appear nowhere in results, logs or the cache.
"""

import json

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer, original_body
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

KEY = "sk-mnemoflowtest-0123456789abcdefghij"


def _reply(body):
    """Judge prompts get "yes"; the agent gets an echo of the question's last line."""
    text = original_body(body)["messages"][-1]["content"]
    if "yes or no" in text:
        return "yes"
    return "Answer: " + text.strip().splitlines()[-1]


def test_agent_and_judge_through_an_openai_compatible_server(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_TEST_KEY", KEY)
    with OpenAITestServer(reply=_reply, api_key=KEY) as server:
        endpoint = {
            "base_url": server.base_url,
            "model": "mnemoflow-test",
            "api_key_env": "MNEMOFLOW_TEST_KEY",
            "concurrency": 4,
        }
        override = tmp_path / "endpoint.yaml"
        # the tiny run's systems write and embed offline, on purpose (docs/gateway.md)
        bound = {"agent": endpoint, "judge": endpoint}
        offline = ["memory_writer", "embedder"]
        prices = {"mnemoflow-test": {"input": 1.0, "output": 2.0}}  # USD per million tokens
        override.write_text(
            json.dumps({"models": bound, "allow_offline_roles": offline, "prices": prices})
        )
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")
        snakemake(wd, configfiles=(TINY, override))
        stats = server.stats()

    answers = pd.concat(pd.read_parquet(p) for p in wd.glob("results/**/answers.parquet"))
    assert set(answers["model"]) == {"mnemoflow-test"}
    assert answers["response"].str.startswith("Answer: ").all()
    assert (answers["tokens_in"] > 0).any()
    judged = pd.concat(pd.read_parquet(p) for p in wd.glob("results/**/judgements.parquet"))
    assert (judged["raw_reply"] == "yes").all() and (judged["value"] == 1.0).all()
    every = ledgers(wd, "answers.ledger.json") + ledgers(wd, "judgements.ledger.json")
    assert sum(ledger["totals"]["calls"] for ledger in every) == len(answers) + len(judged)
    misses = sum(ledger["totals"]["calls"] - ledger["totals"]["cache_hits"] for ledger in every)
    # Every request that missed the shared cache reached the server exactly once.
    assert sum(stats.answered.values()) == stats.total == misses > 0
    # Dollars in every ledger, at the config's prices; the offline roles cost nothing.
    for ledger in every:
        totals = ledger["totals"]
        expected = (totals["tokens_in"] * 1.0 + totals["tokens_out"] * 2.0) / 1e6
        assert totals["usd"] == pytest.approx(expected)
    assert sum(ledger["totals"]["usd"] for ledger in every) > 0
    summary = (wd / "results" / "summary.md").read_text()
    assert "## Cost" in summary and "USD / correct" in summary
    leaked = [
        str(path) for path in wd.rglob("*") if path.is_file() and KEY.encode() in path.read_bytes()
    ]
    assert not leaked, f"the API key leaked into {leaked}"
