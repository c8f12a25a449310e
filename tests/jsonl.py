"""JSON-lines input files for the command-line tests (predictions, retrieval logs, pairs)."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, records) -> Path:
    """``records`` one JSON object a line, UTF-8 (non-ASCII text as it is, not ``\\u`` escapes)."""
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path
