"""Endpoint limits hold for the whole run: many jobs at once stay within the endpoint's concurrency.

The agent and judge roles both call the local test server (concurrency 4, endpoint_jobs 2: each
job holds a share of 2). The workflow runs with ``--cores 8``, so up to 8 answer or judge jobs
could run at once; without run-wide limits each would send up to 4 requests (32 in flight).
"""

import json

import pytest

from mnemoflow.testing.openai_server import OpenAITestServer
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

CONCURRENCY = 4
#: Every judgement of the tiny run (2 systems x 2 steps x 2 shards): answering and judging only.
JUDGEMENTS = [
    f"results/synthetic/{system}/qa/step{step}/shard{shard}/judgements.parquet"
    for system in ("none", "bm25_message")
    for step in (0, 1)
    for shard in (0, 1)
]


def test_requests_in_flight_never_exceed_the_endpoint_concurrency(tmp_path):
    with OpenAITestServer(latency=0.5, reply=lambda body: "yes") as server:
        endpoint = {"base_url": server.base_url, "model": "m", "concurrency": CONCURRENCY}
        override = tmp_path / "endpoint.yaml"
        override.write_text(
            json.dumps({"endpoint_jobs": 2, "models": {"agent": endpoint, "judge": endpoint}})
        )
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")
        log = snakemake(wd, "--cores", "8", configfiles=(TINY, override), targets=JUDGEMENTS)
        stats = server.stats()
    every = ledgers(wd, "answers.ledger.json") + ledgers(wd, "judgements.ledger.json")
    misses = sum(ledger["totals"]["calls"] - ledger["totals"]["cache_hits"] for ledger in every)
    assert stats.total == misses > 2 * CONCURRENCY
    assert "endpoint_127_0_0_1_" in log  # the jobs declared their share of the endpoint
    print(f"max in flight: {stats.max_inflight} of {CONCURRENCY}, {stats.total} requests")
    assert 2 <= stats.max_inflight <= CONCURRENCY
