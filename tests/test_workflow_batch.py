"""A tiny static-QA run with agent and judge in Batch-API mode gives the online run's tables.

Both runs ask the test server's answering model (tests/answering_model.py); the batch run's
answer and judge jobs send their cache misses through the server's Batch API, so it gets no chat
completion at all, and its ledgers count every reply as a batch call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer
from tests.answering_model import answer
from tests.workflow import TINY, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

SUMMARY = ("results/summary.parquet",)
#: What differs between any two runs: wall time and where a reply came from.
TIMING = ["latency_s", "retrieval_s", "retrieval_cold_s", "cache_hit"]
OVERRIDE = {
    "allow_offline_roles": ["memory_writer", "embedder"],  # bm25 writes none; bag-of-words
    "run": {"benchmarks": ["synthetic"], "systems": ["bm25_message"]},
    "benchmarks": {
        "synthetic": {
            "shards": 1,
            "params": {"users": 2, "periods": 1, "sessions_per_period": 2, "seed": 3},
        }
    },
}


def run(tmp_path: Path, server: OpenAITestServer, **batch) -> Path:
    tmp_path.mkdir()
    wd = workdir(tmp_path)
    endpoint = {"base_url": server.base_url, "model": "qwen3", **batch}
    models = {"agent": endpoint, "judge": endpoint, "embedder": {"backend": "offline"}}
    override = wd / "override.yaml"
    override.write_text(json.dumps({**OVERRIDE, "models": models}))
    snakemake(wd, targets=SUMMARY, configfiles=(TINY, override))
    return wd


def table(wd: Path, name: str) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(wd.glob(f"results/synthetic/**/{name}"))]
    frame = pd.concat(frames).drop(columns=TIMING, errors="ignore")
    if "metric" in frame:  # retrieval times are wall time
        frame = frame[~frame.metric.str.startswith("retrieval_ms")]
    return frame.reset_index(drop=True)


def test_batch_run_tables_equal_the_online_run(tmp_path):
    with OpenAITestServer(reply=answer) as server:
        online = run(tmp_path / "online", server)
        asked_online = server.stats().paths["chat"]
        server.reset()
        batch = run(tmp_path / "batch", server, batch=True, batch_poll_s=0.05)
        assert server.stats().paths["chat"] == 0 and server.batch_api.created >= 2
    assert asked_online > 0
    for name in ("answers.parquet", "judgements.parquet", "scores.parquet"):
        pd.testing.assert_frame_equal(table(online, name), table(batch, name))
    summary = [pd.read_parquet(wd / SUMMARY[0]) for wd in (online, batch)]
    accuracy = [s[s.metric == "accuracy"].reset_index(drop=True) for s in summary]
    assert len(accuracy[0]) > 0
    pd.testing.assert_frame_equal(*accuracy)
    for stage in ("answer", "judge"):
        online_totals = [led["totals"] for led in ledgers(online, f"{stage}.ledger.json")]
        batch_totals = [led["totals"] for led in ledgers(batch, f"{stage}.ledger.json")]
        assert [t["calls"] for t in batch_totals] == [t["calls"] for t in online_totals]
        assert [t["batch_calls"] for t in batch_totals] == [t["calls"] for t in online_totals]
        assert all(led.get("batch_ids") for led in ledgers(batch, f"{stage}.ledger.json"))
