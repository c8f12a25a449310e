"""Response cache: sharded directory vs the old SQLite file, same run: ``python -m bench.cache``.

Method (recorded in docs/performance.md, "Response cache"): for each design, one process writes
``--entries`` chat completions (distinct sha256 keys, replies of 100-600 characters like a short
model answer) through ``put`` one at a time, as the gateway does, and ``--vectors`` 384-float
embeddings through ``put_vectors`` in batches of 100; the cache is then closed and opened again
(so look-ups read what is on disk, not what the writer remembers: for the sharded cache this
includes building the index from the index files, reported as "open"). Hit latency is the mean
time per ``get`` over every key in a shuffled order; it is measured ``--runs`` times and the
median run is reported (with the spread). Vector look-ups are ``get_vectors`` of 100 keys at a
time. Both designs run on the same file system in the same process, one after the other, so the
ratio is meaningful even on a busy shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.llm.cache import ResponseCache, cache_key
from mnemoflow.llm.sqlite_cache import SqliteResponseCache
from mnemoflow.llm.types import Completion

DESIGNS: dict[str, Callable[[Path], Any]] = {
    "sqlite (old)": lambda root: SqliteResponseCache(root / "llm.sqlite"),
    "shards (new)": lambda root: ResponseCache(root / "llm"),
}


def _entries(n: int, seed: int) -> list[tuple[str, Completion]]:
    rng = random.Random(seed)
    words = "the a memory user said on friday that their bicycle is kept in garage".split()
    out = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(20, 100)))
        out.append((cache_key({"bench": i}), Completion(text, "m", rng.randint(50, 2000), 40)))
    return out


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(name: str, root: Path, entries, vectors, runs: int, seed: int) -> dict[str, Any]:
    make = DESIGNS[name]
    cache = make(root)

    def write() -> None:
        for key, completion in entries:
            cache.put(key, completion)

    write_s = _timed(write)
    vector_keys = list(vectors)
    vector_write_s = _timed(
        lambda: [
            cache.put_vectors({k: vectors[k] for k in vector_keys[i : i + 100]})
            for i in range(0, len(vector_keys), 100)
        ]
    )
    cache.close()
    opened_at = time.perf_counter()
    cache = make(root)
    open_s = time.perf_counter() - opened_at
    keys = [key for key, _ in entries]
    random.Random(seed).shuffle(keys)
    hit_us: list[float] = []
    for _ in range(runs):
        elapsed = _timed(lambda: [cache.get(key) for key in keys])
        hit_us.append(elapsed / len(keys) * 1e6)
    probe = entries[len(entries) // 2]
    assert cache.get(probe[0]).text == probe[1].text
    assert cache.count() == len(entries)
    vector_us: list[float] = []
    for _ in range(runs):
        elapsed = _timed(
            lambda: [
                cache.get_vectors(vector_keys[i : i + 100]) for i in range(0, len(vector_keys), 100)
            ]
        )
        vector_us.append(elapsed / max(1, len(vector_keys)) * 1e6)
    misses = [cache_key({"absent": i}) for i in range(2000)]
    miss_us = _timed(lambda: [cache.get(key) for key in misses]) / len(misses) * 1e6
    cache.close()
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {
        "design": name,
        "entries": len(entries),
        "vectors": len(vectors),
        "write_per_s": len(entries) / write_s,
        "vector_write_per_s": len(vectors) / vector_write_s if vectors else None,
        "open_s": open_s,
        "hit_us_runs": hit_us,
        "hit_us": statistics.median(hit_us),
        "vector_hit_us": statistics.median(vector_us),
        "miss_us": miss_us,
        "disk_mb": size / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cache", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--vectors", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a tmp dir)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    entries = _entries(args.entries, args.seed)
    rng = np.random.default_rng(args.seed)
    vectors = {
        cache_key({"vector": i}): rng.standard_normal(384).astype(np.float32)
        for i in range(args.vectors)
    }
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for name in DESIGNS:
            root = Path(tmp) / name.split()[0]
            root.mkdir()
            rows.append(measure(name, root, entries, vectors, args.runs, args.seed))
    old, new = rows
    machine = platform.processor() or platform.machine()
    print(f"{platform.node()} {machine}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print("| design | writes/s | vector writes/s | open s | hit µs (runs) | vector hit µs ", end="")
    print("| miss µs | MB |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        runs = ", ".join(f"{v:.1f}" for v in row["hit_us_runs"])
        print(
            f"| {row['design']} | {row['write_per_s']:,.0f} "
            f"| {row['vector_write_per_s'] or 0:,.0f} "
            f"| {row['open_s']:.3f} | {row['hit_us']:.1f} ({runs}) | {row['vector_hit_us']:.1f} "
            f"| {row['miss_us']:.1f} | {row['disk_mb']:.0f} |"
        )
    print(
        f"hit latency new/old: {new['hit_us'] / old['hit_us']:.2f}x; "
        f"write throughput new/old: {new['write_per_s'] / old['write_per_s']:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
