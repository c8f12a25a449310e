"""A step's memory snapshot on disk: one folder per episode holding its memory's saved state, and a
manifest (plus, where the system reports them, the stored ids).

Every protocol publishes its snapshot the same way: it is built in a staging folder beside the
target and renamed over it only when complete, so the next step, a rerun after a crash, or a
concurrent reader sees the previous snapshot or the whole new one, never half of one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mnemoflow.memory.base import MemorySystem

MANIFEST = "manifest.json"
STORED_IDS = "stored_ids.json"


@contextmanager
def publishing(out_dir: Path) -> Iterator[Path]:
    """A fresh staging folder beside ``out_dir``; when the block ends it replaces ``out_dir``,
    and when the block raises it is removed (``out_dir`` is left as it was)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield staging
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def save_episode(staging: Path, dirname: str, memory: MemorySystem) -> Path:
    """Save ``memory`` into its own new episode folder of the snapshot; the folder is returned."""
    target = staging / dirname
    target.mkdir()
    memory.save(target)
    return target


def write_manifest(
    staging: Path, manifest: dict[str, Any], stored: dict[str, list[str]] | None = None
) -> None:
    """The snapshot's manifest and, when given, its stored ids (episode -> sorted ids)."""
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if stored is not None:
        (staging / STORED_IDS).write_text(json.dumps(stored, sort_keys=True) + "\n")
