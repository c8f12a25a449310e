"""Feedback-family throughput against the local test server: ``python -m bench.feedback``.

Method (recorded in docs/performance.md): the test server runs in a separate process, answers every
chat completion after a fixed latency (50 ms) with one fixed JSON text that the simulated user
parses as "dislike, continue" (so every dialogue runs its full ``max_rounds``: 3 answers and 2
feedback turns = 5 calls). A MemoryBench-shaped set (datasets of 200 train / 50 test items, the
LexEval / NFCats / JRE-L families, en and zh) goes through the protocol code the workflow runs:
``generate_train_dialogues`` (agent and user roles, live conversation loop), then the dialogues are
memorized (bm25_message, not timed: no model calls) and ``answer_step`` answers the test split,
once with bm25_message retrieval and once with ``none`` (no retrieval: the protocol and gateway
alone; BM25 retrieval is CPU work on the event loop and bounds the first).
Agent and user are bound to the server with concurrency 32 each and the protocol keeps at most 32
items in flight, so at most 32 calls are in flight in total: the ideal is 32 / latency. In the same
run, ``bench.gateway``'s own figure (the bare Gateway at concurrency 32 on the same server) is
measured, and each phase's calls per second is reported as a share of the ideal and as a ratio to
that figure. Every prompt is unique and the cache is fresh, so every call reaches the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pandas as pd

from bench.gateway import _gateway_run
from mnemoflow.data.tables import QUESTIONS, SESSIONS
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols.step import StepContext

REPLY = json.dumps(
    {
        "reasoning": "The answer is incomplete.",
        "implicit_action": "dislike",
        "behavior": "continue_conversation",
        "response": "Please be more specific.",
    }
)
DATASETS = (("LexEval-QA", "zh"), ("NFCats", "en"), ("JRE-L", "en"))


class Server:
    """The test server in a child process, answering REPLY after ``latency`` seconds."""

    def __init__(self, latency: float):
        command = [sys.executable, "-m", "mnemoflow.testing.openai_server"]
        self.proc = subprocess.Popen(
            [*command, "--latency", str(latency), "--reply", REPLY],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("serving "):
            self.proc.kill()
            raise RuntimeError(f"bench: test server did not start (said {line!r})")
        self.base_url = line.split()[1]
        self._root = self.base_url.removesuffix("/v1")

    def answered(self) -> int:
        with urllib.request.urlopen(f"{self._root}/mnemoflow/stats") as reply:
            stats = json.load(reply)
        return sum(stats["answered"].values())

    def max_inflight(self) -> int:
        with urllib.request.urlopen(f"{self._root}/mnemoflow/stats") as reply:
            return int(json.load(reply)["max_inflight"])

    def reset(self) -> None:
        request = urllib.request.Request(f"{self._root}/mnemoflow/reset", method="POST", data=b"")
        urllib.request.urlopen(request).close()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def memorybench_shaped(train: int, test: int, tag: str) -> pd.DataFrame:
    """Questions rows shaped like a MemoryBench domain: unique prompts per run (``tag``)."""
    rows = []
    for dataset, lang in DATASETS:
        for i in range(train + test):
            rows.append(
                {
                    "benchmark": "memorybench", "dataset": dataset,
                    "episode_id": f"{dataset}_{i}", "question_id": f"{dataset}_{i}",
                    "split": "train" if i < train else "test",
                    "question": f"[{tag}] {dataset} question {i}: what does the rule say?",
                    "answer": f"The rule {i} says something specific.", "question_type": "",
                    "question_time": "", "options": [], "gold_option": -1, "evidence_ids": [],
                    "checkpoint": 0, "lang": lang,
                    "meta": json.dumps({"test_idx": i, "info": {"golden_answer": "x"}}),
                }
            )  # fmt: skip
    return pd.DataFrame(rows, columns=QUESTIONS.names)


async def feedback_run(
    base_url: str, concurrency: int, questions: pd.DataFrame, cache: Path, out: Path
) -> dict[str, tuple[int, float]]:
    """(calls, seconds) of dialogue generation and of answering, through the protocol code."""
    binding = {"base_url": base_url, "model": "bench-model", "concurrency": concurrency}
    gateway = Gateway.from_config({"agent": binding, "user": binding}, cache)
    config = fb.FeedbackConfig(max_rounds=3)
    system = {"type": "bm25_message", "top_k": 5}
    sessions = pd.DataFrame(columns=SESSIONS.names)
    keys = {"benchmark": "bench", "system": "bm25_message", "protocol": "off_policy", "step": 0}
    try:
        started = time.perf_counter()
        ctx = StepContext(system, gateway, keys)
        dialogues = await fb.generate_train_dialogues(
            questions, sessions, ctx, config, fb.metrics_module("memorybench")
        )
        generation = time.perf_counter() - started
        await fb.ingest_step("off_policy", 0, dialogues, questions, sessions, ctx, None, out)
        started = time.perf_counter()
        answers = await fb.answer_step("off_policy", questions, sessions, out, ctx, config)
        answering = time.perf_counter() - started
        # the same answering without retrieval: what the protocol and gateway cost alone
        bare = out.with_name("none")
        plain_ctx = ctx.with_spec({"type": "none"})
        await fb.ingest_step("off_policy", 0, dialogues, questions, sessions, plain_ctx, None, bare)
        started = time.perf_counter()
        plain = await fb.answer_step("off_policy", questions, sessions, bare, plain_ctx, config)
        plain_seconds = time.perf_counter() - started
    finally:
        await gateway.aclose()
        gateway.close()
    calls = gateway.ledger.totals().calls
    return {
        "generation": (calls - len(answers) - len(plain), generation),
        "answering": (len(answers), answering),
        "answering (none)": (len(plain), plain_seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.feedback", description=__doc__)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--train", type=int, default=200, help="training items per dataset")
    parser.add_argument("--test", type=int, default=50, help="test items per dataset")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    fb.ITEM_CONCURRENCY = args.concurrency  # at most `concurrency` calls in flight in total
    ideal = args.concurrency / args.latency
    server = Server(args.latency)
    rates: dict[str, list[float]] = {
        "gateway": [], "generation": [], "answering": [], "answering (none)": []
    }  # fmt: skip
    inflight = 0
    try:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                n = int(ideal * 2)
                timing = asyncio.run(
                    _gateway_run(server.base_url, args.concurrency, n, f"g{run}", Path(tmp) / "c")
                )
                rates["gateway"].append(timing.requests / timing.seconds)
                server.reset()
                questions = memorybench_shaped(args.train, args.test, f"run{run}-{time.time()}")
                result = asyncio.run(
                    feedback_run(server.base_url, args.concurrency, questions,
                                 Path(tmp) / "f", Path(tmp) / "memory")
                )  # fmt: skip
                inflight = max(inflight, server.max_inflight())
                for phase, (calls, seconds) in result.items():
                    rates[phase].append(calls / seconds)
                server.reset()
    finally:
        server.close()
    gateway = statistics.median(rates["gateway"])
    lines = [
        f"latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, ideal "
        f"{ideal:.0f} calls/s, {args.runs} runs (median), max in flight seen {inflight}",
        "| phase | calls/s | share of ideal | ratio to gateway |",
        "|---|---|---|---|",
    ]
    for phase in rates:
        rate = statistics.median(rates[phase])
        lines.append(f"| {phase} | {rate:.0f} | {rate / ideal:.0%} | {rate / gateway:.0%} |")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"ideal": ideal, "rates": rates}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
