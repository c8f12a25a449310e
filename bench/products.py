"""Memory products beside the baselines on LoCoMo retrieval (docs/memory.md, "Memory products").

For each LoCoMo conversation (read from ``../shared/data/locomo/locomo10.json``, never copied)
and each system, one memory ingests every session through the gateway (offline backend for the
writer; the embedder offline-hashed or MiniLM), then answers every question with evidence:

- evidence recall@k (the share of a question's evidence turns among the source turns of the
  top-k items, as ``tests/test_memory_retrieval.py``);
- per conversation: ingest seconds, writer calls and the prompt / reply tokens they carried,
  embedding texts, items stored and the saved snapshot's bytes;
- per query: retrieval latency p50 / p95.

Run: ``python -m bench.products [--conversations 10] [--embedder offline|minilm] [--k 10]
[--systems bm25_message,dense_message,mem0_paper,mem0_graph,graphiti]``. mem0_* and graphiti
need the extra ``products`` (``make install-products``), a_mem the extra ``products-amem``
(``make install-amem``). Not part of CI: minutes per system.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import build
from mnemoflow.protocols.static_qa import to_messages

EMBEDDERS = {"minilm": {"backend": "sentence_transformers"}, "offline": {}}
SYSTEMS = {
    "bm25_message": {"type": "bm25_message"},
    "dense_message": {"type": "dense_message"},
    "mem0_paper": {"type": "mem0_paper", "speaker_roles": "all_user", "update_batch": 2},
    "mem0_graph": {"type": "mem0_graph", "speaker_roles": "all_user", "update_batch": 2},
    "graphiti": {"type": "graphiti"},
    "memoryos": {"type": "memoryos"},
    "a_mem": {"type": "a_mem"},
    "langmem": {"type": "langmem", "update_batch": 2},
}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _totals(gateway: Gateway) -> dict[str, float]:
    entries = gateway.ledger.to_dict()["by_role_task"]
    writer = [e for key, e in entries.items() if key.startswith("memory_writer/")]
    embed = entries.get("embedder/embed", {})
    return {
        "writer_calls": sum(e["calls"] for e in writer),
        "tokens_in": sum(e["tokens_in"] for e in writer),
        "tokens_out": sum(e["tokens_out"] for e in writer),
        "embed_texts": embed.get("calls", 0),
    }


async def one_conversation(
    name: str, spec: dict[str, Any], episode: str, prepared, embedder: dict, k: int
) -> dict[str, Any]:
    sessions = prepared.sessions[prepared.sessions.episode_id == episode]
    turns = sessions.sort_values(["session_index", "turn_index"])
    questions = prepared.questions[prepared.questions.episode_id == episode]
    with tempfile.TemporaryDirectory() as scratch:
        # A fresh cache: every call counted is a call made.
        gateway = Gateway.from_config({"embedder": embedder} if embedder else {}, Path(scratch))
        memory = build(spec, llm=gateway)
        started = time.perf_counter()
        await memory.add(to_messages(turns))
        ingest_s = time.perf_counter() - started
        ingested = _totals(gateway)
        snapshot = Path(scratch) / "snapshot"
        snapshot.mkdir()
        memory.save(snapshot)
        recalls, latencies = [], []
        for q in questions.itertuples(index=False):
            evidence = list(q.evidence_ids)
            if not evidence:
                continue
            started = time.perf_counter()
            items = await memory.retrieve(q.question, k)
            latencies.append(time.perf_counter() - started)
            got = {s for item in items[:k] for s in item.source_ids}
            recalls.append(sum(e in got for e in evidence) / len(evidence))
        await gateway.aclose()
        gateway.close()
        return {
            "system": name,
            "episode": episode,
            "turns": len(turns),
            "ingest_s": ingest_s,
            **ingested,
            "items": memory.stats().get("items", len(turns)),
            "snapshot_bytes": _folder_bytes(snapshot),
            "recalls": recalls,
            "latencies": latencies,
        }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(rows: list[dict[str, Any]], k: int, embedder: str) -> str:
    lines = [
        f"| system | recall@{k} | questions | ingest s / conv | writer calls / conv "
        "| writer tokens in / out per conv | embedded texts / conv | items / conv "
        "| snapshot KB / conv | query ms p50 / p95 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == name]
        n = len(mine)
        recalls = [x for r in mine for x in r["recalls"]]
        latencies = [x for r in mine for x in r["latencies"]]

        def per(key: str, rows=mine, n=n) -> float:
            return sum(r[key] for r in rows) / n

        lines.append(
            f"| {name} ({embedder}) | {statistics.mean(recalls):.3f} | {len(recalls)} "
            f"| {per('ingest_s'):.1f} | {per('writer_calls'):.0f} "
            f"| {per('tokens_in'):.0f} / {per('tokens_out'):.0f} | {per('embed_texts'):.0f} "
            f"| {per('items'):.0f} | {per('snapshot_bytes') / 1024:.0f} "
            f"| {1000 * _quantile(latencies, 0.5):.1f} / {1000 * _quantile(latencies, 0.95):.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="offline")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--systems", default="bm25_message,dense_message,mem0_paper")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    prepared = load_benchmark({"loader": "locomo", "source": {"path": str(args.data)}})
    episodes = sorted(prepared.sessions.episode_id.unique())[: args.conversations]
    rows = []
    for name in args.systems.split(","):
        for episode in episodes:
            row = asyncio.run(
                one_conversation(
                    name, SYSTEMS[name], episode, prepared, EMBEDDERS[args.embedder], args.k
                )
            )
            print(
                f"{name} {episode}: recall {statistics.mean(row['recalls']):.3f} "
                f"ingest {row['ingest_s']:.1f} s, {row['writer_calls']} writer calls",
                file=sys.stderr,
                flush=True,
            )
            rows.append(row)
    print(report(rows, args.k, args.embedder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
