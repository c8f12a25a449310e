"""A tiny static-QA run against the test server with a bounded prefix cache, with
``prefix_dispatch`` off and on: the same tables, a higher share of prompt tokens served from the
server's cache with it on, and the ledgers' ``cached_in`` equal to what the server reported."""

import json

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer
from tests.answering_model import answer
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow


def _run(tmp_path, dispatch: bool):
    with OpenAITestServer(reply=answer, prefix_cache_blocks=48) as server:
        role = {
            "base_url": server.base_url,
            "model": "mnemoflow-test",
            "concurrency": 4,
            "prefix_dispatch": dispatch,
        }
        override = tmp_path / f"dispatch-{dispatch}.yaml"
        override.write_text(
            json.dumps(
                {
                    "models": {"agent": role, "judge": role},
                    "allow_offline_roles": ["memory_writer", "embedder"],
                    "run": {"systems": ["full_context"]},
                    "benchmarks": {"synthetic": {"shards": 1}},
                }
            )
        )
        (tmp_path / f"run-{dispatch}").mkdir()
        wd = workdir(tmp_path / f"run-{dispatch}")
        snakemake(wd, configfiles=(TINY, override), targets=("results/summary.md",))
        stats = server.stats()
    summary = pd.read_parquet(wd / "results" / "summary.parquet")
    every = ledgers(wd, "answers.ledger.json") + ledgers(wd, "judgements.ledger.json")
    cached = sum(ledger["totals"]["cached_in"] for ledger in every)
    return wd, summary, stats, cached


def test_the_same_tables_and_more_served_from_the_prefix_cache(tmp_path):
    off, on = _run(tmp_path, False), _run(tmp_path, True)
    timed = off[1]["metric"].str.startswith("retrieval_ms")  # wall time, not a result
    pd.testing.assert_frame_equal(off[1][~timed], on[1][~timed])
    columns = ["question_id", "response", "retrieved_ids", "tokens_in", "tokens_out"]
    off_answers, on_answers = (
        pd.concat(pd.read_parquet(p) for p in sorted(wd.glob("results/**/answers.parquet")))
        for wd in (off[0], on[0])
    )
    assert len(off_answers) > 0
    pd.testing.assert_frame_equal(off_answers[columns], on_answers[columns])
    shares = {}
    for name, (_, _, stats, cached) in {"off": off, "on": on}.items():
        assert cached == stats.cached_tokens  # the ledgers count what the server reported
        shares[name] = stats.cached_tokens / stats.prompt_tokens
        assert stats.max_inflight <= 8  # agent and judge jobs: 4 each at most
    assert shares["on"] > shares["off"]
    text = (on[0] / "results" / "summary.md").read_text()
    assert "## Provider prompt cache" in text and "full_context" in text
