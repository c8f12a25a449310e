"""Endpoint limits hold for the whole run: many jobs at once stay within the endpoint's concurrency.

The agent and judge roles both call the local test server (concurrency 3, endpoint_jobs 3: each
job holds a share of 1, so at most 3 jobs call it at once). The tiny workflow runs with
``--cores 8``: up to 8 answer or judge jobs could call the server side by side. A control rerun
of answering and judging with the budget lifted (``--resources endpoint_...=1000``, a fresh
cache) shows that this run does put more than 3 requests in flight when nothing holds it back,
so the bound measured first is the limits' doing, not the machine's slowness.
"""

import json

import pytest

from mnemoflow.llm.limits import endpoint_resource
from mnemoflow.testing.openai_server import OpenAITestServer
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

CONCURRENCY = 3
#: Every judgement of the tiny run (2 systems x 2 steps x 2 shards): answering and judging only.
JUDGEMENTS = [
    f"results/synthetic/{system}/qa/step{step}/shard{shard}/judgements.parquet"
    for system in ("none", "bm25_message")
    for step in (0, 1)
    for shard in (0, 1)
]


def _misses(wd) -> int:
    every = ledgers(wd, "answers.ledger.json") + ledgers(wd, "judgements.ledger.json")
    return sum(ledger["totals"]["calls"] - ledger["totals"]["cache_hits"] for ledger in every)


def test_requests_in_flight_never_exceed_the_endpoint_concurrency(tmp_path):
    with OpenAITestServer(latency=1.5, reply=lambda body: "yes") as server:
        endpoint = {"base_url": server.base_url, "model": "m", "concurrency": CONCURRENCY}
        override = tmp_path / "endpoint.yaml"
        override.write_text(
            json.dumps(
                {
                    "endpoint_jobs": 3,
                    "models": {"agent": endpoint, "judge": endpoint},
                    "allow_offline_roles": ["memory_writer", "embedder"],  # tiny run, on purpose
                }
            )
        )
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")
        log = snakemake(wd, "--cores", "8", configfiles=(TINY, override), targets=JUDGEMENTS)
        limited = server.stats()
        limited_misses = _misses(wd)
        name = endpoint_resource(server.base_url)

        server.reset()
        fresh_cache = tmp_path / "control.yaml"
        fresh_cache.write_text(json.dumps({"cache": "results/cache/control"}))
        lifted = f"{name}=1000"
        snakemake(
            wd,
            *("--cores", "8", "--forcerun", "answer", "judge", "--resources", lifted),
            configfiles=(TINY, override, fresh_cache),
            targets=JUDGEMENTS,
        )
        control = server.stats()

    assert f"{name}=1" in log  # every answer and judge job declared its share of the endpoint
    assert limited.total == limited_misses > 8 * CONCURRENCY
    print(f"max in flight: {limited.max_inflight} of {CONCURRENCY} ({limited.total} requests)")
    print(f"budget lifted: {control.max_inflight} ({control.total} requests)")
    assert limited.max_inflight <= CONCURRENCY
    assert control.max_inflight > CONCURRENCY
