"""A memory's footprint beside its scores: retrieval latency per query and memory size.

Memory papers lead with these two beside accuracy (Mem0's p50 / p95 search latency, the memory
tokens or bytes a conversation leaves behind), because a system that wins by keeping everything
or by searching for seconds is not the same result. Both are SCORES rows of a static QA step:

- ``retrieval_ms_p50`` / ``retrieval_ms_p95``: the wall time of ``memory.retrieve`` per question
  (the answers' ``retrieval_s``), in milliseconds; ``n`` the questions timed. Wall time in the
  answer job, where episodes are answered concurrently: a retrieval that awaits a model (an
  embedder, a product's search-time call) includes that wait and the event loop's other work, as
  a user of the memory would see it. A reader that takes its rankings from a retrieval log
  times nothing (no rows).
- ``memory_kb``: the mean size on disk of an episode's memory snapshot after the step's
  ingestion (its folder under the shards' ``memory`` snapshots), in KiB; ``n`` the episodes.
  The snapshot is what the system keeps (messages, facts, indexes, a product's database), so
  systems are comparable however they store it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from mnemoflow.data.tables import RUN_KEYS, SCORES

RUN_COLUMNS = [name for name, _ in RUN_KEYS]
METRICS = ("retrieval_ms_p50", "retrieval_ms_p95", "memory_kb")


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (Snakemake's own marker files left out)."""
    return sum(
        path.stat().st_size
        for path in folder.rglob("*")
        if path.is_file() and not path.name.startswith(".snakemake")
    )


def episode_sizes(snapshots: Iterable[Path]) -> list[int]:
    """Bytes of each episode's folder in the given snapshots (one folder per episode)."""
    return [
        folder_bytes(episode)
        for snapshot in snapshots
        for episode in sorted(Path(snapshot).iterdir())
        if episode.is_dir()
    ]


def footprint_scores(answers: pd.DataFrame, snapshots: Iterable[Path]) -> pd.DataFrame:
    """The step's footprint as SCORES rows (aggregate ``micro``), keyed by the answers' run."""
    if answers.empty:
        return pd.DataFrame(columns=SCORES.names)
    keys = answers[RUN_COLUMNS].iloc[0].to_dict()
    rows = []
    timed = pd.to_numeric(answers["retrieval_s"], errors="coerce").dropna() * 1000.0
    if not timed.empty:
        for metric, q in (("retrieval_ms_p50", 0.5), ("retrieval_ms_p95", 0.95)):
            rows.append(
                {**keys, "metric": metric, "value": float(timed.quantile(q)), "n": len(timed)}
            )
    sizes = episode_sizes(snapshots)
    if sizes:
        mean_kb = sum(sizes) / len(sizes) / 1024.0
        rows.append({**keys, "metric": "memory_kb", "value": mean_kb, "n": len(sizes)})
    frame = pd.DataFrame(rows, columns=[c for c in SCORES.names if c != "aggregate"])
    return frame.assign(aggregate="micro")[SCORES.names]
