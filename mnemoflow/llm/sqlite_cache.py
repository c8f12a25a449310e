"""The previous response cache: one SQLite file in WAL mode (mnemoflow <= the sharded cache).

Kept for two reasons only: importing an old ``llm.sqlite`` into the sharded cache
(:mod:`mnemoflow.llm.cache`) and measuring the new design against it (``bench/cache.py``). WAL
relies on shared memory between the processes that open the file, which network file systems
(NFS, Lustre) do not provide, so it must not be shared between cluster nodes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mnemoflow.llm.types import Completion

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT NOT NULL,
    tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL, created REAL NOT NULL);
"""


class SqliteResponseCache:
    """SQLite-backed get/put for chat completions and embeddings (same interface as the new one)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        if self.path is None:
            self._db = sqlite3.connect(":memory:", isolation_level=None)
            self._db.executescript(_SCHEMA)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=60000")
        # Several jobs may open a new cache file at the same instant; switching it to WAL needs a
        # moment of exclusive access that the busy handler does not always wait for, so retry.
        for attempt in range(100):
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 99:
                    raise
                time.sleep(0.05 + 0.01 * attempt)

    def get(self, key: str) -> Completion | None:
        row = self._db.execute(
            "SELECT text, model, tokens_in, tokens_out FROM responses WHERE key = ?", (key,)
        ).fetchone()
        return Completion(*row) if row else None

    def put(self, key: str, completion: Completion) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                completion.text,
                completion.model,
                completion.tokens_in,
                completion.tokens_out,
                time.time(),
            ),
        )

    def get_vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk
            ).fetchall()
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_vectors(self, items: dict[str, np.ndarray]) -> None:
        now = time.time()
        rows = [
            (key, int(vec.shape[0]), np.asarray(vec, dtype=np.float32).tobytes(), now)
            for key, vec in items.items()
        ]
        self._db.execute("BEGIN")
        self._db.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?)", rows)
        self._db.execute("COMMIT")

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def read_sqlite_cache(
    path: str | Path,
) -> tuple[Iterator[tuple[str, Completion]], Iterator[tuple[str, np.ndarray]]]:
    """Every response and every vector of an old cache file, opened read-only (for the import)."""
    db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)

    def responses() -> Iterator[tuple[str, Completion]]:
        for key, *row in db.execute(
            "SELECT key, text, model, tokens_in, tokens_out FROM responses ORDER BY rowid"
        ):
            yield key, Completion(*row)

    def vectors() -> Iterator[tuple[str, np.ndarray]]:
        for key, blob in db.execute("SELECT key, vector FROM embeddings ORDER BY rowid"):
            yield key, np.frombuffer(blob, dtype=np.float32)

    return responses(), vectors()
