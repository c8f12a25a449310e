"""Memory-system benchmark on LongMemEval-M-shaped synthetic haystacks.

LongMemEval-M gives each question a haystack of about 500 sessions (about 5,000 turns) drawn from
a pool that questions share. This benchmark builds such a pool with the synthetic generator, gives
each of ``--questions`` questions its own seeded sample of ``--sessions`` sessions, and measures per
question:

- BM25 over messages: index + query time with bm25s and with rank_bm25, in the same run;
- dense over messages (``dense_message``): index + query time without the embedding cache (a fresh
  in-memory cache per question, measured on ``--uncached`` questions because it is slow) and with
  the shared cache, where each distinct turn of the pool is embedded once;
- peak resident memory of the process.

Run: ``python -m bench.memory [--embedder minilm|offline] [--questions 50] [--sessions 500]``;
``--bm25-only`` skips the dense rows (minutes with MiniLM) when only BM25 changed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import Message, build
from mnemoflow.memory.tokenize import tokenize

EMBEDDERS = {"minilm": {"backend": "sentence_transformers"}, "offline": {}}


SYLLABLES = (
    "ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu "
    "na ne ni no nu ra re ri ro ru sa se si so su ta te ti to tu"
).split()
#: A 4,000-word pseudo vocabulary: turns padded with it are distinct texts of realistic length,
#: as LongMemEval's are (the generator's templates alone would repeat and flatter the cache).
VOCAB = [a + b + c for a in SYLLABLES[:20] for b in SYLLABLES for c in SYLLABLES[:4]]


def make_pool(
    n_sessions: int, turns: int, words: int, seed: int
) -> tuple[dict[str, list[Message]], list[str]]:
    prepared = load_benchmark(
        {
            "loader": "synthetic",
            "params": {
                "users": 1,
                "periods": 1,
                "sessions_per_period": n_sessions,
                "turns_per_session": turns,
                "attributes_per_user": 11,
                "seed": seed,
            },
        }
    )
    rng = random.Random(seed)
    pool: dict[str, list[Message]] = {}
    for row in prepared.sessions.sort_values(["session_index", "turn_index"]).itertuples():
        content = row.content + " " + " ".join(rng.choices(VOCAB, k=words))
        pool.setdefault(row.session_id, []).append(
            Message(row.turn_id, row.session_id, row.role, content, row.speaker, row.session_time)
        )
    return pool, list(prepared.questions.question)


def bm25_backends():
    """The project's BM25Index when present, else the two libraries driven the same way."""
    try:
        from mnemoflow.memory.bm25_index import BM25Index

        return "mnemoflow.memory.bm25_index.BM25Index", BM25Index
    except ImportError:
        return "libraries directly (BM25Index not in this checkout)", _DirectBM25


class _DirectBM25:
    def __init__(self, docs: list[list[str]], backend: str):
        docs = [d or ["\x00"] for d in docs]
        self.backend = backend
        if backend == "bm25s":
            import bm25s

            self.vocab: dict[str, int] = {}
            ids = [[self.vocab.setdefault(t, len(self.vocab)) for t in d] for d in docs]
            self.index = bm25s.BM25(method="robertson")
            self.index.index(
                bm25s.tokenization.Tokenized(ids=ids, vocab=self.vocab), show_progress=False
            )
        else:
            from rank_bm25 import BM25Okapi

            self.index = BM25Okapi(docs)

    def search(self, tokens: list[str], k: int):
        if self.backend == "bm25s":
            scores = self.index.get_scores([self.vocab[t] for t in tokens if t in self.vocab])
        else:
            scores = self.index.get_scores(tokens)
        order = np.argsort(-np.asarray(scores), kind="stable")[:k]
        return order, np.asarray(scores)[order]


def _table(results: dict[str, list[float]]) -> None:
    print("\n| system | questions | mean s / question | median s | max s |")
    print("|---|---:|---:|---:|---:|")
    for name, times in results.items():
        if times:
            print(
                f"| {name} | {len(times)} | {statistics.mean(times):.3f} | "
                f"{statistics.median(times):.3f} | {max(times):.3f} |"
            )


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def dense_question(llm: Gateway, turns: list[Message], query: str) -> float:
    started = time.perf_counter()
    system = build({"type": "dense_message", "top_k": 10}, llm=llm)
    await system.add(turns)
    await system.retrieve(query)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=500, help="sessions per haystack")
    parser.add_argument("--pool", type=int, default=1500, help="sessions in the shared pool")
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--words", type=int, default=40, help="padding words per turn")
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm")
    parser.add_argument("--uncached", type=int, default=2, help="questions timed without cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bm25-only", action="store_true", help="skip the dense rows")
    args = parser.parse_args(argv)

    pool, queries = make_pool(args.pool, args.turns, args.words, args.seed)
    ids = sorted(pool)
    haystacks = []
    for q in range(args.questions):
        chosen = sorted(random.Random(f"{args.seed}:{q}").sample(ids, args.sessions))
        haystacks.append([m for sid in chosen for m in pool[sid]])
    n_turns = statistics.mean(len(h) for h in haystacks)
    distinct = len({m.turn_id for h in haystacks for m in h})
    print(
        f"pool {args.pool} sessions; {args.questions} questions x {args.sessions} sessions "
        f"({n_turns:.0f} turns each, {distinct} distinct turns in all)"
    )

    results: dict[str, Any] = {}
    source, BM25 = bm25_backends()
    numba = importlib.util.find_spec("numba") is not None
    print(f"BM25 via {source}; bm25s backend: {'numba' if numba else 'numpy'} (backend='auto')")
    for backend in ("bm25s", "rank_bm25"):
        times, parts = [], {"tokenize": [], "index": [], "query": []}
        for q, turns in enumerate(haystacks):
            started = time.perf_counter()
            docs = [tokenize(m.content) for m in turns]
            tokenized = time.perf_counter()
            index = BM25(docs, backend=backend)
            indexed = time.perf_counter()
            index.search(tokenize(queries[q % len(queries)]), 10)
            done = time.perf_counter()
            times.append(done - started)
            parts["tokenize"].append(tokenized - started)
            parts["index"].append(indexed - tokenized)
            parts["query"].append(done - indexed)
        results[f"bm25 ({backend})"] = times
        split = ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in parts.items())
        print(f"bm25 ({backend}): {statistics.mean(times):.3f} s / question (median {split})")
    print(f"peak RSS after BM25: {peak_rss_mib():.0f} MiB")
    if args.bm25_only:
        _table(results)
        return 0

    spec = EMBEDDERS[args.embedder]
    uncached = []
    for q in range(min(args.uncached, args.questions)):
        llm = Gateway.from_config({"embedder": spec} if spec else {})  # in-memory, empty cache
        uncached.append(asyncio.run(dense_question(llm, haystacks[q], queries[q % len(queries)])))
        print(f"dense, no cache, question {q}: {uncached[-1]:.1f} s", flush=True)
        llm.close()
    results[f"dense {args.embedder}, no cache"] = uncached
    with tempfile.TemporaryDirectory() as tmp:
        llm = Gateway.from_config({"embedder": spec} if spec else {}, Path(tmp) / "cache.sqlite")
        cached = [
            asyncio.run(dense_question(llm, turns, queries[q % len(queries)]))
            for q, turns in enumerate(haystacks)
        ]
        entry = llm.ledger.entries["embedder/embed"]
        computed = entry.calls - entry.cache_hits
        llm.close()
    results[f"dense {args.embedder}, shared cache (first question)"] = cached[:1]
    results[f"dense {args.embedder}, shared cache (later questions)"] = cached[1:]

    _table(results)
    print(
        f"\nembedding cache: {entry.calls} texts requested, {computed} computed "
        f"({distinct} distinct turns + distinct queries)"
    )
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
