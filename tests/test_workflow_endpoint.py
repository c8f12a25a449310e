"""The workflow against an OpenAI-compatible endpoint (the local test server): the real client path.

The agent and judge roles are bound to the server by a config override, with a canary in every
place a secret can be given: the API key (api_key_env), a header (headers_env), a token path
segment of the agent's base_url (config text) and the judge endpoint's whole URL (base_url_env).
None may appear in any file of the run (results, logs, cache, ``.snakemake`` metadata) nor on
its console.
"""

import json

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer, original_body
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

KEY = "sk-mnemoflowtest-0123456789abcdefghij"  # api_key_env's value
PATH_TOKEN = "tok-canary-path-7d1f0c"  # a path segment of models.agent.base_url (config text)
URL_TOKEN = "tok-canary-envurl-4b9e2a"  # a path segment of endpoints.gateway.base_url_env's URL
HEADER = "canary-header-value-93c5e1"  # headers_env's value (the server requires the header)
CANARIES = (KEY, PATH_TOKEN, URL_TOKEN, HEADER)


def _reply(body):
    """Judge prompts get "yes"; the agent gets an echo of the question's last line."""
    text = original_body(body)["messages"][-1]["content"]
    if "yes or no" in text:
        return "yes"
    return "Answer: " + text.strip().splitlines()[-1]


def test_agent_and_judge_through_an_openai_compatible_server(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_TEST_KEY", KEY)
    monkeypatch.setenv("MNEMOFLOW_TEST_SIG", HEADER)
    served = OpenAITestServer(
        reply=_reply, api_key=KEY, prefixes=[PATH_TOKEN, URL_TOKEN], headers={"X-Sig": HEADER}
    )
    with served as server:
        root = server.base_url.removesuffix("/v1")
        monkeypatch.setenv("MNEMOFLOW_TEST_URL", f"{root}/{URL_TOKEN}/v1")
        secrets = {
            "api_key_env": "MNEMOFLOW_TEST_KEY",
            "headers_env": {"X-Sig": "MNEMOFLOW_TEST_SIG"},
        }
        role = {"model": "mnemoflow-test", "concurrency": 4}
        # the agent in the role schema, the judge through the endpoints schema
        agent = {"base_url": f"{root}/{PATH_TOKEN}/v1", **role, **secrets}
        gateway = {"base_url_env": "MNEMOFLOW_TEST_URL", **secrets}
        override = tmp_path / "endpoint.yaml"
        # the tiny run's systems write and embed offline, on purpose (docs/gateway.md)
        bound = {"agent": agent, "judge": {"endpoint": "gateway", **role}}
        offline = ["memory_writer", "embedder"]
        prices = {"mnemoflow-test": {"input": 1.0, "output": 2.0}}  # USD per million tokens
        override.write_text(
            json.dumps(
                {
                    "models": bound,
                    "endpoints": {"gateway": gateway},
                    "allow_offline_roles": offline,
                    "prices": prices,
                }
            )
        )
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")
        console = snakemake(wd, configfiles=(TINY, override))
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
    files = [path for path in wd.rglob("*") if path.is_file()]
    for canary in CANARIES:
        leaked = [str(path) for path in files if canary.encode() in path.read_bytes()]
        assert not leaked, f"{canary} leaked into {leaked}"
        assert canary not in console
    # the params Snakemake keeps name the endpoints by their redacted form, and so do the ledgers
    metadata = [p.read_text() for p in (wd / ".snakemake" / "metadata").iterdir()]
    assert any("/redacted-" in text for text in metadata)
    roles = every[0]["roles"]
    assert roles["agent"]["base_url"].startswith("http://127.0.0.1:")
    assert "/redacted-" in roles["agent"]["base_url"]
    assert ledgers(wd, "judgements.ledger.json")[0]["roles"]["judge"]["base_url"] == (
        "env://MNEMOFLOW_TEST_URL"
    )
