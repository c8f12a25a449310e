"""Content-addressed response cache in SQLite, shared by every job of a workflow run.

WAL mode and a busy timeout let several Snakemake jobs (separate processes) read and write the same
file at once. The key is a hash of what determines a reply (backend, model, messages, sampling
parameters, seed; for the offline backend also the structured fields it reads) and never includes
the API key or the endpoint address, so a cache can be shared and published.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.llm.types import Completion

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT NOT NULL,
    tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL, created REAL NOT NULL);
"""


def cache_key(payload: dict[str, Any]) -> str:
    """Stable sha256 of a JSON payload (sorted keys, no whitespace variation)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite-backed get/put for chat completions and embeddings."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        if self.path is None:
            self._db = sqlite3.connect(":memory:", isolation_level=None)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        self._db.executescript(_SCHEMA)

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
