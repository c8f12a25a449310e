"""Corrupt outputs: found, moved aside to ``results/quarantine/`` and made again, never read.

A truncated or damaged table under ``results/`` would otherwise fail the job that reads it, and
Snakemake then deletes that job's valid outputs; a damaged table whose modification time was kept
would go unnoticed. So:

- :func:`sweep` runs when the workflow is parsed (``rules/common.smk``): every Parquet table and
  ledger under ``results/`` whose size or modification time changed since it last passed is
  checked (a Parquet footer and, for the tables whose name fixes their schema, its columns; a
  ledger's JSON); a bad one is moved to ``results/quarantine/<its path under results>`` so
  Snakemake sees it missing and makes it again (from the response cache: no model call), while
  every valid file stays as it is. A bad file inside a directory output (a memory snapshot,
  marked by Snakemake's ``.snakemake_timestamp``) moves the whole directory.
- :func:`record_outputs` adds ``outputs: {file: {bytes, sha256}}`` to a job's ledger, and
  :func:`verify` (``mnemoflow verify``) compares every ledger's outputs with the files, so a
  file changed with its modification time kept is found too; a table no ledger lists gets the
  footer check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mnemoflow.data.tables import SCHEMAS, matches_schema, write_atomic_text

log = logging.getLogger("mnemoflow")

QUARANTINE = "quarantine"
#: Folders of ``results/`` that hold no job's checked output: the response cache (it checks its
#: own records), the logs and what was already moved aside.
SKIPPED = frozenset({QUARANTINE, "cache", "logs"})
#: Snakemake's marker of a finished ``directory()`` output.
DIRECTORY_MARK = ".snakemake_timestamp"
#: Where the parse-time sweep keeps (size, mtime) of the files that passed, so a parse checks
#: only what changed since (a footer read is ~0.1-0.5 ms; a stat ~3 µs).
STATE = Path(".snakemake") / "mnemoflow-checked.json"
#: Table names whose file always holds that schema (``scores`` / ``question_scores`` do not:
#: ``mnemoflow score`` and the interactive chain write other columns under those names).
NAMED_SCHEMAS = ("answers", "judgements", "sessions", "questions", "episode_sessions", "summary")


@dataclass(frozen=True)
class Problem:
    """A file that cannot be used: its path and why, in one line."""

    path: Path
    reason: str

    def line(self) -> str:
        return f"{self.path}: {self.reason}"


def check_parquet(path: Path) -> str | None:
    """Why ``path`` is not a whole Parquet table of its schema, or None. Reads the footer only."""
    try:
        found = pq.read_metadata(path).schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a damaged footer
        return f"not a readable Parquet file ({str(exc).splitlines()[0][:160]})"
    expected = SCHEMAS.get(path.stem) if path.stem in NAMED_SCHEMAS else None
    if expected is not None and not matches_schema(found.names, expected):
        return f"columns {found.names} are not the {path.stem} table's {expected.names}"
    return None


def check_json(path: Path) -> str | None:
    """Why the JSON file ``path`` (a ledger) cannot be read, or None."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"not readable JSON ({str(exc)[:160]})"
    return None


def check_file(path: Path) -> str | None:
    """Why a checked output cannot be used, or None (other files are not checked)."""
    if path.suffix == ".parquet":
        return check_parquet(path)
    if path.name.endswith(".ledger.json"):
        return check_json(path)
    return None


def _is_checked(name: str) -> bool:
    return not name.startswith(".") and (name.endswith(".parquet") or name.endswith(".ledger.json"))


def checked_entries(folder: str, top: bool = True) -> Iterator[os.DirEntry]:
    """The directory entries of every Parquet table and ledger under ``folder`` outside
    :data:`SKIPPED` and hidden names (a table being written is a hidden temporary file until it
    is renamed), with ``os.scandir``: a parse-time walk over thousands of files."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if not entry.name.startswith(".") and not (top and entry.name in SKIPPED):
                yield from checked_entries(entry.path, top=False)
        elif _is_checked(entry.name):
            yield entry


def checked_files(results: Path) -> Iterator[Path]:
    """:func:`checked_entries` as paths."""
    for entry in checked_entries(str(results)):
        yield Path(entry.path)


def digest(path: Path) -> dict[str, Any]:
    """``{bytes, sha256}`` of a file, as a ledger's ``outputs`` records it."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return {"bytes": path.stat().st_size, "sha256": sha.hexdigest()}


def record_outputs(ledger: str | os.PathLike, files: Iterable[str | os.PathLike]) -> None:
    """Add ``outputs: {file: {bytes, sha256}}`` (names relative to the ledger's folder) to a
    job's ledger, once its other outputs are written. Directories are left out."""
    ledger = Path(ledger)
    data = json.loads(ledger.read_text(encoding="utf-8"))
    outputs = {}
    for file in files:
        file = Path(file)
        if file.is_file() and file != ledger:
            outputs[os.path.relpath(file, ledger.parent)] = digest(file)
    data["outputs"] = dict(sorted(outputs.items()))
    write_atomic_text(ledger, json.dumps(data, indent=2, sort_keys=True) + "\n")


def quarantine_path(path: Path, results: Path) -> Path:
    """Where ``path`` (under ``results``) goes: ``results/quarantine/<relative path>``, with a
    time suffix when an earlier copy is already there."""
    target = results / QUARANTINE / path.relative_to(results)
    if target.exists() or target.is_symlink():
        target = target.with_name(f"{target.name}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    return target


def directory_output(path: Path, results: Path) -> Path | None:
    """The ``directory()`` output ``path`` lies in (the nearest folder with Snakemake's marker)."""
    for folder in path.parents:
        if folder == results or results not in folder.parents:
            return None
        if (folder / DIRECTORY_MARK).exists():
            return folder
    return None


def quarantine(path: Path, results: Path) -> Path:
    """Move a bad file (or the directory output holding it) to the quarantine; its new path."""
    moved = directory_output(path, results) or path
    target = quarantine_path(moved, results)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(moved, target)
    return target


def other_snakemake_running(workdir: Path) -> bool:
    """Whether a Snakemake lock is held in ``workdir`` (another run writing these files)."""
    locks = workdir / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


def _load_state(path: Path) -> dict[str, list[int]]:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def sweep(results: str | os.PathLike = "results", workdir: str | os.PathLike = ".") -> list[str]:
    """Check what changed under ``results`` since the last sweep and quarantine what is bad.

    Returns one line per bad file (what it was, where it went). Nothing moves while another
    Snakemake holds the working directory's lock (its jobs may be writing): the lines then say
    so, and the next run moves them.
    """
    results, workdir = Path(results), Path(workdir)
    if not results.is_dir():
        return []
    state_path = workdir / STATE
    passed = _load_state(state_path)
    now: dict[str, list[int]] = {}
    bad: list[Problem] = []
    for entry in checked_entries(str(results)):
        try:
            stat = entry.stat(follow_symlinks=True)
        except OSError:
            continue
        stamp = [stat.st_size, stat.st_mtime_ns]
        if passed.get(entry.path) == stamp:
            now[entry.path] = stamp
            continue
        reason = check_file(Path(entry.path))
        if reason is None:
            now[entry.path] = stamp
        else:
            bad.append(Problem(Path(entry.path), reason))
    lines = []
    if bad and other_snakemake_running(workdir):
        return [f"{p.line()}; not moved: another Snakemake holds this directory" for p in bad]
    for problem in bad:
        if not problem.path.exists():  # already moved with its directory output
            continue
        target = quarantine(problem.path, results)
        lines.append(f"{problem.line()}: moved to {target}; it is made again")
    if now != passed:
        state_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_text(state_path, json.dumps(now))
    return lines


def sweep_results(main_process: bool = True, results: str = "results") -> None:
    """The parse-time sweep (``rules/common.smk``): in the main Snakemake process only (every
    cluster job re-parses the workflow), each moved file logged in one line."""
    if not main_process:
        return
    for line in sweep(results):
        log.warning("mnemoflow: %s", line)


def verify(results: str | os.PathLike) -> tuple[list[Problem], int]:
    """Every bad output under ``results``, and how many files were checked.

    A file a ledger lists (``outputs``) must have its recorded size and sha256 (so a change
    that kept the modification time is found); every other table and ledger gets
    :func:`check_file`. A listed file that is missing is not a problem here: Snakemake makes it.
    """
    results = Path(results)
    problems: list[Problem] = []
    listed: set[Path] = set()
    files = list(checked_files(results))
    for ledger in (p for p in files if p.name.endswith(".ledger.json")):
        reason = check_json(ledger)
        if reason is not None:
            problems.append(Problem(ledger, reason))
            continue
        outputs = json.loads(ledger.read_text(encoding="utf-8")).get("outputs") or {}
        for name, recorded in outputs.items():
            path = Path(os.path.normpath(ledger.parent / name))
            listed.add(path)
            if not path.is_file():
                continue
            found = digest(path)
            if found["bytes"] != recorded.get("bytes"):
                problems.append(
                    Problem(path, f"{found['bytes']} bytes, {ledger} recorded {recorded['bytes']}")
                )
            elif found["sha256"] != recorded.get("sha256"):
                problems.append(Problem(path, f"sha256 differs from the one {ledger} recorded"))
    for path in files:
        if path not in listed and not path.name.endswith(".ledger.json"):
            reason = check_file(path)
            if reason is not None:
                problems.append(Problem(path, reason))
    return problems, len(files)
