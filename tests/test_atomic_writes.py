"""Atomic writes (tables.write_table, write_atomic_text): the bytes reach the disk before the
rename publishes the file, and the rename itself is made durable.

Without the fsync a machine crash shortly after a job ends can leave a file that exists, has the
finished name and is empty or partly zero (the rename reached the disk, the data did not).
"""

from __future__ import annotations

import os

import pandas as pd

from mnemoflow.data import tables


def _trace(monkeypatch) -> list[tuple[str, str]]:
    """Record fsync (of which file) and replace calls, in order."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _expected(tmp_path, path) -> list[tuple[str, str]]:
    return [("fsync", "temporary"), ("replace", str(path)), ("fsync", str(tmp_path))]


def _named(events, tmp_path) -> list[tuple[str, str]]:
    """The temporary file's name is random: call it that."""
    tmp = f"{tmp_path}/."  # mkstemp names start with a dot
    return [
        (kind, "temporary" if kind == "fsync" and name.startswith(tmp) else name)
        for kind, name in events
    ]


def test_write_table_syncs_the_file_then_renames_then_syncs_the_directory(tmp_path, monkeypatch):
    events = _trace(monkeypatch)
    path = tmp_path / "scores.parquet"
    frame = pd.DataFrame(
        {
            "benchmark": ["b"],
            "system": ["s"],
            "protocol": ["p"],
            "step": [0],
            "metric": ["f1"],
            "aggregate": ["micro"],
            "value": [0.5],
            "n": [2],
        }
    )
    tables.write_table(frame, path, "scores")
    assert _named(events, tmp_path) == _expected(tmp_path, path)
    assert tables.read_table(path, "scores")["value"].tolist() == [0.5]


def test_write_atomic_text_syncs_the_file_then_renames_then_syncs_the_directory(
    tmp_path, monkeypatch
):
    events = _trace(monkeypatch)
    path = tmp_path / "ledger.json"
    tables.write_atomic_text(path, '{"calls": 3}\n')
    assert _named(events, tmp_path) == _expected(tmp_path, path)
    assert path.read_text() == '{"calls": 3}\n'
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]  # no temporary left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
