"""Merging the response cache's shards into one, once no job writes to them.

Every process that writes the cache appends to its own shard pair (:mod:`mnemoflow.llm.cache`),
so a run of thousands of jobs leaves thousands of small pairs, and every later job reads all their
index files when it opens the cache. :func:`compact` merges them into one pair. It keeps the
cache's promise that an entry is served the same reply before and after, and never lost:

- it refuses while any shard may still have a writer: one of this host's processes holds its
  index open (``/proc``; only writers do), or it changed less than ``min_age`` seconds ago (a job
  on another node), or an old SQLite cache is being imported;
- it reads every shard as a reader does (:func:`~mnemoflow.llm.cache.shard_records`: index CRC,
  data digest) in the order a newly opened cache indexes them (sorted names), and keeps the first
  whole record of each key, which is the one such a cache serves. Records that do not read back
  were misses already and stay out;
- it writes the merged pair under temporary names, syncs it, renames the data file and then the
  index (readers find a shard by its index), reads it back and compares every record with what it
  kept; only then does it remove the sources, index first, each only if it is unchanged since it
  was read. At every moment each entry is in at least one whole pair a reader can see;
- the merged pair's name starts with ``+``, which sorts before every writer's ``<host>-...``, so
  it stays first in every reader's order, and a later compaction merges it like any other pair.

A process that still has a source open reads on from it; one that finds it gone reads the
merged pair (the cache refreshes on a failed read), and a writer whose pair was removed starts a
new one, so neither loses an entry or asks the model again.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from mnemoflow.llm.cache import (
    _HEADER,
    _INDEX_BODY,
    _OFFSET_BITS,
    MAGIC,
    RESPONSE,
    SHARDS,
    STALE_CLAIM_S,
    _digest,
    resolve_cache_dir,
    shard_records,
)

#: Default seconds a shard must have been unchanged before it counts as finished.
MIN_AGE_S = 600.0
#: The merged pair's name prefix: sorts before every writer's ``<host>-<pid>-<token>``.
MERGED = "+merged"


class CacheBusy(ValueError):
    """The cache may still have a writer; the message names the shards and why."""


@dataclass
class CompactReport:
    """What a compaction did (all counts are records, not bytes, unless named so)."""

    merged_shards: int = 0
    responses: int = 0
    vectors: int = 0
    duplicates: int = 0  # later records of a key already kept: never served by a new reader
    unreadable: int = 0  # source records that did not check: misses before, absent after
    bytes_before: int = 0
    bytes_after: int = 0
    kept_sources: list[str] = field(default_factory=list)  # changed while compacting: left
    merged: str = ""

    def line(self) -> str:
        kept = len(self.kept_sources)
        return (
            f"merged {self.merged_shards} shard pairs into {self.merged or 'none'}: "
            f"{self.responses} replies, {self.vectors} vectors, {self.duplicates} duplicate and "
            f"{self.unreadable} unreadable records dropped, {self.bytes_before:,} -> "
            f"{self.bytes_after:,} bytes" + (f"; left {kept} that changed since" if kept else "")
        )


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:40] or "host"


def _open_here(paths: set[str]) -> set[str]:
    """Which of ``paths`` one of our own processes on this host holds open (``/proc``). Other
    users' processes cannot be inspected; their shards fall under ``min_age`` like a remote
    job's."""
    held: set[str] = set()
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return held
    uid = os.getuid()
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # ended meanwhile, or not ours to inspect
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in paths:
                held.add(target)
    return held


def busy_shards(directory: Path, min_age: float = MIN_AGE_S, now: float | None = None) -> list[str]:
    """Why the cache may still have a writer, one reason per file (empty: safe to compact).

    A writer holds its index file open; a reader holds only data files, and reading on from a
    removed one is safe, so a job that only reads does not hold a compaction up.
    """
    shards = directory / SHARDS
    now = time.time() if now is None else now
    reasons = []
    for claim in directory.glob(".importing-*"):
        done = directory / claim.name.replace(".importing-", "imported-", 1)
        if not done.exists() and now - claim.stat().st_mtime < STALE_CLAIM_S:
            reasons.append(f"{claim.name}: an old cache file is being imported")
    files = sorted(
        p
        for p in shards.iterdir()
        if p.suffix in (".data", ".index") and not p.name.startswith(MERGED)
    )  # a merged pair is written once by a compaction and never appended to
    indexed = {p.stem for p in files if p.suffix == ".index"}
    # every index, and the data file of a writer that has not created its index yet
    watched = [p for p in files if p.suffix == ".index" or p.stem not in indexed]
    held = _open_here({str(p.resolve()) for p in watched})
    for path in files:
        age = now - path.stat().st_mtime
        if str(path.resolve()) in held:
            reasons.append(f"{path.name}: open for writing in a process of this host")
        elif age < min_age:
            reasons.append(f"{path.name}: changed {age:.0f} s ago (min age {min_age:g} s)")
    return reasons


def compact(path: str | Path, min_age: float = MIN_AGE_S) -> CompactReport:
    """Merge every shard pair of the cache at ``path`` into one (see the module doc)."""
    directory, _ = resolve_cache_dir(path)
    shards = directory / SHARDS
    if not shards.is_dir():
        raise ValueError(f"{directory}: not a response cache (no {SHARDS}/ directory)")
    busy = busy_shards(directory, min_age)
    if busy:
        more = f" (and {len(busy) - 3} more)" if len(busy) > 3 else ""
        raise CacheBusy(
            f"{directory}: a job may still write this cache, not compacting: "
            + "; ".join(busy[:3])
            + more
        )
    report = CompactReport()
    # the order a newly opened cache reads them in (by file name), so the first record is its
    stems = [name[:-6] for name in sorted(os.listdir(shards)) if name.endswith(".index")]
    _remove_leftovers(shards, set(stems), min_age)
    if len(stems) < 2:
        report.merged = stems[0] if stems else ""
        return report
    stem = f"{MERGED}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    sizes = {s: _sizes(shards, s) for s in stems}
    report.bytes_before = sum(sum(size) for size in sizes.values())
    written = _write_merged(shards, stem, stems, report)
    _publish(shards, stem)
    readback = [
        (kind, key, _digest(kind, key, payload))
        for kind, key, payload in shard_records(shards, stem)
    ]
    if readback != written:
        for suffix in (".index", ".data"):
            (shards / f"{stem}{suffix}").unlink(missing_ok=True)
        raise OSError(
            f"{shards / stem}: the merged shard did not read back as written "
            f"({len(readback)} of {len(written)} records); sources left as they were"
        )
    for source in stems:
        if _sizes(shards, source) != sizes[source]:
            report.kept_sources.append(source)
            continue
        (shards / f"{source}.index").unlink(missing_ok=True)  # first: no index without data
        (shards / f"{source}.data").unlink(missing_ok=True)
    _sync_directory(shards)
    report.merged_shards = len(stems) - len(report.kept_sources)
    report.merged = stem
    report.bytes_after = sum(_sizes(shards, stem)) + sum(
        sum(_sizes(shards, s)) for s in report.kept_sources
    )
    return report


def _sizes(shards: Path, stem: str) -> tuple[int, int]:
    return (shards / f"{stem}.index").stat().st_size, (shards / f"{stem}.data").stat().st_size


def _write_merged(
    shards: Path, stem: str, sources: list[str], report: CompactReport
) -> list[tuple[int, bytes, bytes]]:
    """Write the first whole record of every key to ``.<stem>.*.tmp``; returns what it wrote as
    ``(kind, key, digest)`` in order, for the read-back."""
    seen: set[tuple[int, bytes]] = set()
    written: list[tuple[int, bytes, bytes]] = []
    offset = 0
    data_tmp, index_tmp = _temporary(shards, stem, ".data"), _temporary(shards, stem, ".index")
    with open(data_tmp, "xb") as data, open(index_tmp, "xb") as index:
        for source in sources:
            records = 0
            for kind, key, payload in shard_records(shards, source):
                records += 1
                if (kind, key) in seen:
                    report.duplicates += 1
                    continue
                seen.add((kind, key))
                if offset >= 1 << _OFFSET_BITS:
                    raise OSError(f"{shards}: a merged shard of over 1 TB cannot be indexed")
                digest = _digest(kind, key, payload)
                data.write(_HEADER.pack(MAGIC, kind, key, len(payload), digest) + payload)
                body = _INDEX_BODY.pack(kind, key, offset, len(payload))
                index.write(body + struct.pack("<I", zlib.crc32(body)))
                offset += _HEADER.size + len(payload)
                written.append((kind, key, digest))
                if kind == RESPONSE:
                    report.responses += 1
                else:
                    report.vectors += 1
            report.unreadable += _index_records(shards, source) - records
        for handle in (data, index):
            handle.flush()
            os.fsync(handle.fileno())
    return written


def _index_records(shards: Path, stem: str) -> int:
    return (shards / f"{stem}.index").stat().st_size // (_INDEX_BODY.size + 4)


def _temporary(shards: Path, stem: str, suffix: str) -> Path:
    """A name no reader lists (it does not end in ``.index``)."""
    return shards / f".{stem}{suffix}.tmp"


def _publish(shards: Path, stem: str) -> None:
    """Data first, then the index: a reader that finds the index finds the data."""
    for suffix in (".data", ".index"):
        os.replace(_temporary(shards, stem, suffix), shards / f"{stem}{suffix}")
    _sync_directory(shards)


def _remove_leftovers(shards: Path, stems: set[str], min_age: float) -> None:
    """A data file without its index (its writer died between creating the two) and the
    temporary files of a compaction that died hold nothing any reader can see."""
    now = time.time()
    for path in shards.iterdir():
        orphan = path.suffix == ".data" and path.name[: -len(".data")] not in stems
        leftover = path.name.startswith(f".{MERGED}") and path.name.endswith(".tmp")
        if (orphan or leftover) and now - path.stat().st_mtime >= min_age:
            path.unlink(missing_ok=True)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the renames still hold
    finally:
        os.close(fd)
