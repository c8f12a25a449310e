"""Prefix-cache-aware dispatch against a bounded prefix cache: ``python -m bench.prefix_cache``.

Method (recorded in docs/performance.md, "Prefix-cache-aware dispatch"): the test server runs in
a separate process with ``--prefix-cache-blocks N`` (an LRU of N blocks of 16 prompt tokens,
looked up when a request arrives and filled when it completes, as vLLM's automatic prefix
caching). Each shape is ingested and answered with the package's own static-QA code
(``protocols.static_qa.ingest`` and ``answer``, the agent bound to the server with concurrency
8, an empty response cache per run so every request reaches the server), once with
``prefix_dispatch: false`` (the order the job produces requests) and once with ``true``. The
server counts the prompt tokens, those its bounded cache served, and those an unbounded cache
would serve for the same requests (the ideal, which does not depend on their order), and the
most its bounded cache could serve in any order (the ideal without the blocks deeper than N in
their chain, which no cache of N blocks serves); the measure is the cached share against the
ideal (served / ideal), the median of ``--runs`` runs, with the ledger's ``cached_in`` beside the
server's count. Shapes:

- ``locomo_long_context``: 10 conversations of about 3,000 tokens, 30 questions each, every
  prompt the whole conversation then the question (``full_context`` with a budget above the
  conversation: LoCoMo's long-context reading at a tenth of its length);
- ``longmemeval_s_retrieval``: 60 questions, each its own haystack of 30 sessions drawn from a
  shared pool of 120, the top 5 sessions by BM25 in the prompt (``bm25_session``);
- ``synthetic_full_context``: the synthetic benchmark (12 users, 3 periods), ``full_context``;
  ``synthetic_full_context_small``: the same with the test suite's tiny sessions.

Each shape also runs with dispatch on and one request in flight: what the bounded cache can
serve at most in that order (a prompt longer than the cache cannot be served whole).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.gateway import ServerProcess
from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import static_qa as qa
from mnemoflow.protocols.step import StepContext

CONCURRENCY = 8
WORDS = (
    "garden river kitchen bicycle violin market winter holiday cousin library project "
    "recipe mountain painting office coffee morning evening train letter camera museum"
).split()
#: 441 compound words: rare enough per session for BM25 to tell sessions apart
VOCABULARY = [a + b for a in WORDS for b in WORDS]


@dataclass
class Shape:
    name: str
    blocks: int  # the server's cache, in blocks of 16 tokens
    system: dict[str, Any]
    tables: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]


@dataclass
class Row:
    shape: str
    dispatch: bool
    blocks: int
    concurrency: int
    requests: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)  # cached / prompt tokens
    ideal: list[float] = field(default_factory=list)  # ideal cached / prompt tokens
    of_ideal: list[float] = field(default_factory=list)  # cached / ideal cached
    #: the most the bounded cache can serve in any order / ideal cached
    bound: list[float] = field(default_factory=list)
    ledger_vs_server: list[float] = field(default_factory=list)  # ledger cached_in / server's

    def median(self, name: str) -> float:
        return statistics.median(getattr(self, name))


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


def _turn(benchmark, episode, session, index, time, k, role, content, step=0):
    return {
        "benchmark": benchmark,
        "episode_id": episode,
        "session_id": session,
        "session_index": index,
        "session_time": time,
        "step": step,
        "turn_id": f"{session}_{k}",
        "turn_index": k,
        "role": role,
        "speaker": role,
        "content": content,
        "has_evidence": False,
    }


#: The question columns every generated question has alike.
_QUESTION = dict(
    split="test", answer="unknown", question_type="single-hop", question_time="", options=[],
    gold_option=-1, evidence_ids=[], checkpoint=0, lang="en", meta="{}",
)  # fmt: skip


def _question(benchmark, episode, qid, text):
    ids = {"benchmark": benchmark, "dataset": benchmark, "episode_id": episode}
    return {**_QUESTION, **ids, "question_id": qid, "question": text}


def _episode_rows(benchmark, episode, sessions):
    return [
        {
            "benchmark": benchmark,
            "episode_id": episode,
            "session_id": session,
            "session_index": index,
            "session_time": f"2023-01-{index % 28 + 1:02d}",
            "step": 0,
        }
        for index, session in enumerate(sessions)
    ]


def locomo_shape(seed: int = 0) -> Shape:
    rng = random.Random(seed)
    turns, episodes, questions = [], [], []
    for c in range(10):
        episode = f"conv-{c}"
        ids = [f"{episode}_s{s}" for s in range(8)]
        for s, session in enumerate(ids):
            for k in range(12):
                role = "user" if k % 2 == 0 else "assistant"
                turns.append(_turn("locomo", "", session, s, "", k, role, _sentence(rng, 22)))
        episodes += _episode_rows("locomo", episode, ids)
        questions += [
            _question("locomo", episode, f"{episode}_q{q}", f"What about the {_sentence(rng, 3)}?")
            for q in range(30)
        ]
    system = {"type": "full_context", "max_tokens": 20000}
    return Shape("locomo_long_context", 256, system, _frames(turns, episodes, questions))


def longmemeval_shape(seed: int = 0) -> Shape:
    rng = random.Random(seed)
    pool = [f"pool_s{s}" for s in range(120)]
    turns = [
        _turn("longmemeval", "", session, 0, "", k, "user" if k % 2 == 0 else "assistant",
              _sentence(rng, 30))
        for session in pool
        for k in range(6)
    ]  # fmt: skip
    episodes, questions = [], []
    for q in range(60):
        episode = f"lme-{q}"
        episodes += _episode_rows("longmemeval", episode, rng.sample(pool, 30))
        questions.append(
            _question("longmemeval", episode, f"{episode}_q", f"When did I {_sentence(rng, 3)}?")
        )
    system = {"type": "bm25_session", "top_k": 5}
    return Shape("longmemeval_s_retrieval", 48, system, _frames(turns, episodes, questions))


def synthetic_shape(small: bool = False) -> Shape:
    """The synthetic benchmark's default sizes (12 users, 3 periods), or ``small``: the test
    suite's tiny run's (3 sessions of 4 turns a period) with 12 users, whose prompts fit the
    48-block cache."""
    params: dict[str, Any] = {"users": 12, "periods": 3, "seed": 5}
    if small:
        params.update(periods=2, sessions_per_period=3, turns_per_session=4,
                      attributes_per_user=4, updates_per_period=1)  # fmt: skip
    data = load_benchmark({"loader": "synthetic", "params": params})
    frames = (data.sessions, data.episode_sessions, data.questions)
    system = {"type": "full_context", "max_tokens": 8000}
    name = "synthetic_full_context" + ("_small" if small else "")
    return Shape(name, 48, system, frames)


def _frames(turns, episodes, questions):
    return pd.DataFrame(turns), pd.DataFrame(episodes), pd.DataFrame(questions)


async def _answer_all(
    shape: Shape, url: str, dispatch: bool, folder: Path, concurrency: int
) -> Gateway:
    """Ingest and answer every step of ``shape`` as the workflow's jobs do, one gateway."""
    sessions, episode_sessions, questions = shape.tables
    role = {"base_url": url, "model": "bench-model", "concurrency": concurrency}
    models = {"agent": {**role, "prefix_dispatch": dispatch, "max_tokens": 16}}
    gateway = Gateway.from_config(models, cache_path=folder / "cache")
    episodes = sorted(set(episode_sessions.episode_id))
    previous = None
    async with gateway:
        for step in sorted(set(questions.checkpoint)):
            out = folder / f"step{step}"
            keys = qa.run_keys(shape.name, shape.system["type"], step)
            ctx = StepContext(shape.system, gateway, keys)
            await qa.ingest(sessions, episode_sessions, episodes, ctx, step, previous, out)
            await qa.answer(questions[questions.checkpoint == step], out, ctx)
            previous = out
    return gateway


def measure(shape: Shape, dispatch: bool, runs: int, concurrency: int = CONCURRENCY) -> Row:
    """``concurrency`` 1 with dispatch on: one request at a time in dispatch order, the most a
    bounded cache of that size serves in that order (a reference, not a setting to use)."""
    row = Row(shape.name, dispatch, shape.blocks, concurrency)
    server = ServerProcess(latency=0.02, options=("--prefix-cache-blocks", str(shape.blocks)))
    try:
        for _ in range(runs):
            server.reset()
            with tempfile.TemporaryDirectory() as folder:
                gateway = asyncio.run(
                    _answer_all(shape, server.base_url, dispatch, Path(folder), concurrency)
                )
            stats = server.stats()
            totals = gateway.ledger.totals()
            row.requests = sum(stats["answered"].values())
            if stats["max_inflight"] > concurrency:
                raise RuntimeError(f"bench: {stats['max_inflight']} requests in flight")
            prompt, cached, ideal = (
                stats["prompt_tokens"],
                stats["cached_tokens"],
                stats["ideal_cached_tokens"],
            )
            row.prompt_tokens.append(prompt)
            row.shares.append(cached / prompt)
            row.ideal.append(ideal / prompt)
            row.of_ideal.append(cached / ideal if ideal else float("nan"))
            row.bound.append(stats["bound_cached_tokens"] / ideal if ideal else float("nan"))
            row.ledger_vs_server.append(totals.cached_in / cached if cached else float("nan"))
    finally:
        server.close()
    return row


def table(rows: list[Row]) -> str:
    head = (
        "| shape | cache (blocks) | dispatch | in flight | requests | prompt tokens | cached share "
        "| ideal share | of ideal | any order at most | ledger / server |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.shape} | {r.blocks} | {'on' if r.dispatch else 'off'} | {r.concurrency} | "
        f"{r.requests:,} | {int(r.median('prompt_tokens')):,} | {r.median('shares'):.1%} | "
        f"{r.median('ideal'):.1%} | {r.median('of_ideal'):.1%} | {r.median('bound'):.1%} | "
        f"{r.median('ledger_vs_server'):.3f} |\n"
        for r in rows
    )
    return head + body


def overhead(requests: int = 2000, groups: int = 10, chars: int = 100_000) -> float:
    """Seconds the dispatcher takes to order ``requests`` prompts of ``chars`` characters in
    ``groups`` shared prefixes (LoCoMo long-context at full length: 1,986 questions, 10
    conversations of about 20,000 tokens) against a stand-in endpoint answering in 1 ms,
    32 in flight; the time beyond the stand-in's own is the dispatcher's."""
    from mnemoflow.llm.prefix_dispatch import PrefixDispatcher

    rng = random.Random(0)
    heads = ["".join(rng.choice("abcdefgh ") for _ in range(chars)) for _ in range(groups)]
    prompts = [[{"role": "user", "content": f"{heads[i % groups]} question {i}"}] for i in
               range(requests)]  # fmt: skip

    async def run() -> float:
        dispatcher = PrefixDispatcher(32)

        async def call() -> None:
            await asyncio.sleep(0.001)

        started = time.perf_counter()
        await asyncio.gather(*(dispatcher.send(m, f"k{i}", call) for i, m in enumerate(prompts)))
        return time.perf_counter() - started

    return asyncio.run(run())


SHAPES = {
    "locomo_long_context": locomo_shape,
    "longmemeval_s_retrieval": longmemeval_shape,
    "synthetic_full_context": synthetic_shape,
    "synthetic_full_context_small": lambda: synthetic_shape(small=True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prefix_cache", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (the median is shown)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument(
        "--blocks", type=int, default=None, help="the server's cache in blocks (default: per shape)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--overhead", action="store_true", help="only time the dispatcher on 2,000 long prompts"
    )
    args = parser.parse_args(argv)
    if args.overhead:
        seconds = [overhead() for _ in range(args.runs)]
        each = ", ".join(f"{x:.1f}" for x in seconds)
        median = statistics.median(seconds)
        print(f"dispatch of 2,000 prompts of 100,000 characters: median {median:.1f} s ({each})")
        return 0
    rows = []
    for name in args.shapes.split(","):
        shape = SHAPES[name]()
        shape.blocks = args.blocks or shape.blocks
        for dispatch, concurrency in ((False, CONCURRENCY), (True, CONCURRENCY), (True, 1)):
            rows.append(measure(shape, dispatch, args.runs, concurrency))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
