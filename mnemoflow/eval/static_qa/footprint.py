"""A memory's footprint beside its scores: retrieval latency per query and memory size.

Memory papers lead with these two beside accuracy (Mem0's p50 / p95 search latency, the memory
tokens or bytes a conversation leaves behind), because a system that wins by keeping everything
or by searching for seconds is not the same result. Both are SCORES rows of a static QA step:

- ``retrieval_ms_p50`` / ``retrieval_ms_p95``: the wall time of ``memory.retrieve`` per question
  (the answers' ``retrieval_s``), in milliseconds, over every question but each episode's first;
  ``n`` the questions timed. Wall time in the answer job, where episodes are answered
  concurrently: a retrieval that awaits a model (an embedder, a product's search-time call)
  includes that wait and the event loop's other work, as a user of the memory would see it.
- ``retrieval_ms_cold``: the median of each episode's first retrieval (``retrieval_cold_s``),
  which also opens the memory just loaded from its snapshot (an index built, a model or a
  product's store opened: seconds for a product, against milliseconds warm), so it is kept out
  of the percentiles above; ``n`` the episodes.

A reader that takes its rankings from a retrieval log times nothing (no latency rows).
- ``memory_kb``: the mean size on disk of an episode's memory snapshot after the step's
  ingestion (its folder under the shards' ``memory`` snapshots), in KiB; ``n`` the episodes.
  The snapshot as stored: built-in systems write their items as JSON lines (and vectors), the
  products' adapters a gzip'd tar of the product's store (graphiti's Kuzu file is tens of MB of
  mostly preallocated pages uncompressed), so sizes compare within those groups better than
  across them.

The rows' metric names: :data:`mnemoflow.data.tables.FOOTPRINT_METRICS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from mnemoflow.data.tables import RUN_KEYS, SCORES

RUN_COLUMNS = [name for name, _ in RUN_KEYS]


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


def _milliseconds(seconds: pd.Series) -> pd.Series:
    return pd.to_numeric(seconds, errors="coerce").dropna() * 1000.0


def footprint_scores(answers: pd.DataFrame, snapshots: Iterable[Path]) -> pd.DataFrame:
    """The step's footprint as SCORES rows (aggregate ``micro``), keyed by the answers' run."""
    if answers.empty:
        return pd.DataFrame(columns=SCORES.names)
    keys = answers[RUN_COLUMNS].iloc[0].to_dict()
    rows = []
    timed = _milliseconds(answers["retrieval_s"])
    for metric, q in (("retrieval_ms_p50", 0.5), ("retrieval_ms_p95", 0.95)):
        if not timed.empty:
            value = float(timed.quantile(q))
            rows.append({**keys, "metric": metric, "value": value, "n": len(timed)})
    cold = _milliseconds(answers["retrieval_cold_s"])
    if not cold.empty:
        value = float(cold.median())
        rows.append({**keys, "metric": "retrieval_ms_cold", "value": value, "n": len(cold)})
    sizes = episode_sizes(snapshots)
    if sizes:
        mean_kb = sum(sizes) / len(sizes) / 1024.0
        rows.append({**keys, "metric": "memory_kb", "value": mean_kb, "n": len(sizes)})
    frame = pd.DataFrame(rows, columns=[c for c in SCORES.names if c != "aggregate"])
    return frame.assign(aggregate="micro")[SCORES.names]
