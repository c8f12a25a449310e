"""Content-addressed response cache that jobs on different cluster nodes can share safely.

The key is a hash of what determines a reply (backend, model, messages, sampling parameters, seed,
response format, re-ask number; for the offline backend also the task, the structured fields it
reads and its code's fingerprint; see ``Gateway.request_key``) and never includes the API key or
the endpoint address, so a cache can be shared and published. Values are chat completions and
embedding vectors.

Why not one SQLite file: its WAL mode needs shared memory between the processes that open the
file, and its locks need POSIX locking that NFS and Lustre do not provide reliably, so jobs on
different nodes could corrupt it or wait on it for minutes. This cache needs no lock at all:

- the cache is a directory; every process that writes creates its own pair of shard files,
  ``shards/<host>-<pid>-<token>.data`` and ``.index``, on its first write, and is their only
  writer (append-only); no two processes ever write the same file;
- every process reads every shard: at open it reads all index files into a dict (key -> shard,
  offset, length), and on a miss it reads what the index files gained since, at most once per
  ``refresh_interval`` seconds, so a reply one job stored serves every job started later and,
  within about a second, jobs running beside it;
- a record is used only when it is whole: an index record carries a CRC, a data record its key,
  its length and a blake2b digest of its payload, checked on every read. A torn or half-visible
  record (a killed writer, a page another node has not flushed yet) is a miss, logged once, never
  an entry and never a crash. The same key in two shards (two jobs asked at once) is harmless:
  both records are whole, the first one indexed is served.

A config that still names the old ``llm.sqlite`` file gets the directory beside it (``llm/``) and
the old file's entries imported once; see :func:`resolve_cache_dir`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import socket
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.llm.sqlite_cache import read_sqlite_cache
from mnemoflow.llm.types import Completion

log = logging.getLogger(__name__)

RESPONSE, VECTOR = 1, 2
MAGIC = b"MFC1"
#: Data record header: magic, kind, key (sha256, 32 bytes), payload length, blake2b-128 of payload.
_HEADER = struct.Struct("<4sB32sI16s")
#: Index record: kind, key, offset of the data record, payload length; then a CRC32 of these.
_INDEX_BODY = struct.Struct("<B32sQI")
_INDEX = struct.Struct("<B32sQII")
SHARDS = "shards"
#: Suffixes that mark a config still naming the old SQLite cache file.
LEGACY_SUFFIXES = (".sqlite", ".sqlite3", ".db")
#: An import claim older than this (seconds) belongs to a job that died; the import is redone.
STALE_CLAIM_S = 600.0
_MAX_OPEN_READERS = 256
_OFFSET_BITS, _LENGTH_BITS = 40, 32


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


#: Stands in for ``payload["messages"]`` while the rest of a payload is encoded (random, so no
#: text a payload carries can be taken for it).
_MESSAGES_MARK = f"mnemoflow-messages-{secrets.token_hex(16)}"
_MESSAGES_MARK_JSON = _dumps(_MESSAGES_MARK)

#: UTF-8 JSON of plain {role, content} messages already encoded in this process. A conversation
#: sends its growing history at every turn: each message is encoded once, not once per turn.
_MESSAGE_JSON: dict[tuple[str, str], bytes] = {}
_MESSAGE_JSON_MAX = 100_000


def _message_json(message: Any) -> bytes:
    if type(message) is dict and len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if type(role) is str and type(content) is str:
            key = (role, content)
            text = _MESSAGE_JSON.get(key)
            if text is None:
                if len(_MESSAGE_JSON) >= _MESSAGE_JSON_MAX:
                    _MESSAGE_JSON.clear()
                text = _MESSAGE_JSON[key] = _dumps(message).encode("utf-8")
            return text
    return _dumps(message).encode("utf-8")


def cache_key(payload: dict[str, Any]) -> str:
    """Stable sha256 of a JSON payload (sorted keys, no whitespace variation).

    The text hashed is exactly ``json.dumps(payload, sort_keys=True, ensure_ascii=False,
    separators=(",", ":"))``; a ``messages`` list is spliced in from per-message encodings that
    are kept across calls (:func:`_message_json`), so a growing history costs one encoding per
    new message instead of re-encoding the whole conversation at every turn (AMemGym's loop).
    """
    messages = payload.get("messages")
    if type(messages) is not list:
        return hashlib.sha256(_dumps(payload).encode("utf-8")).hexdigest()
    head, _, tail = _dumps({**payload, "messages": _MESSAGES_MARK}).partition(_MESSAGES_MARK_JSON)
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(b"[" + b",".join([_message_json(m) for m in messages]) + b"]")
    digest.update(tail.encode("utf-8"))
    return digest.hexdigest()


def _key_bytes(key: str) -> bytes:
    """The 32 bytes stored for a key: a sha256 hex key as is, any other string hashed."""
    if len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return hashlib.sha256(key.encode("utf-8")).digest()


def _digest(kind: int, key: bytes, payload: bytes) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(bytes((kind,)))
    digest.update(key)
    digest.update(payload)
    return digest.digest()


def _checked_payload(blob: bytes, kind: int, key: bytes, length: int) -> bytes | None:
    """A data record's payload when the whole record is there and its header and digest match
    what the index promised; ``None`` for a torn, foreign or overwritten record (a miss)."""
    if len(blob) != _HEADER.size + length:
        return None
    magic, stored_kind, stored_key, stored_length, digest = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size :]
    if (magic, stored_kind, stored_key, stored_length) != (MAGIC, kind, key, length):
        return None
    return payload if digest == _digest(kind, key, payload) else None


def resolve_cache_dir(path: str | Path) -> tuple[Path, Path | None]:
    """The cache directory a configured ``cache:`` path names, and an old SQLite file to import.

    A directory (existing or not) is the cache. A path ending in ``.sqlite`` (``.sqlite3``,
    ``.db``) is what configs named before the sharded cache: the cache is the directory beside
    it without the suffix (``results/cache/llm.sqlite`` -> ``results/cache/llm``), and the file,
    if it exists, is imported once. Any other existing file is imported into ``<name>.d``.
    """
    path = Path(path)
    if path.is_dir():
        return path, None
    if path.suffix in LEGACY_SUFFIXES:
        directory = path.with_suffix("")
    elif path.is_file():
        directory = path.with_name(path.name + ".d")
    else:
        return path, None
    legacy = path if path.is_file() else None
    log.info(
        "cache: %s names a SQLite cache file; the cache is now the directory %s%s",
        path,
        directory,
        " (the file's entries are imported once)" if legacy else "",
    )
    return directory, legacy


@dataclass
class _Writer:
    """This process's own shard pair, opened on its first write."""

    number: int
    data: int
    index: int
    size: int
    pid: int


class ResponseCache:
    """get/put for chat completions and embeddings over append-only shards (see module doc).

    ``path=None`` keeps everything in memory (one process, nothing shared).
    """

    def __init__(self, path: str | Path | None, refresh_interval: float = 1.0):
        self.refresh_interval = refresh_interval
        self._lock = threading.RLock()
        self._memory: dict[int, dict[str, Any]] | None = None
        self._index: dict[int, dict[bytes, int]] = {RESPONSE: {}, VECTOR: {}}
        # Further records of an indexed key (rare: two jobs asked at once, or a key rewritten after
        # a damaged record); served when the first one does not read back whole.
        self._spare: dict[tuple[int, bytes], list[int]] = {}
        self._stems: list[str] = []
        self._numbers: dict[str, int] = {}
        self._consumed: list[int] = []  # bytes of each index file already read
        self._readers: dict[int, int] = {}
        self._writer: _Writer | None = None
        self._warned: set[tuple[str, int]] = set()
        self._last_refresh = float("-inf")
        if path is None:
            self.directory = None
            self._memory = {RESPONSE: {}, VECTOR: {}}
            return
        self.directory, legacy = resolve_cache_dir(path)
        self._shards = self.directory / SHARDS
        self._shards.mkdir(parents=True, exist_ok=True)
        self.refresh()
        if legacy is not None:
            self._import_sqlite(legacy)

    # ---- reading -----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the index records other processes appended since the last refresh."""
        if self._memory is not None:
            return
        with self._lock:
            self._last_refresh = time.monotonic()
            try:
                names = os.listdir(self._shards)
            except FileNotFoundError:
                names = []
            for name in sorted(names):
                if name.endswith(".index") and name[:-6] not in self._numbers:
                    self._add_shard(name[:-6])
            own = self._writer.number if self._writer else -1
            for number in range(len(self._stems)):
                if number != own:
                    self._read_index(number)

    def _add_shard(self, stem: str) -> int:
        self._numbers[stem] = len(self._stems)
        self._stems.append(stem)
        self._consumed.append(0)
        return self._numbers[stem]

    def _read_index(self, number: int) -> None:
        stem = self._stems[number]
        try:
            with open(self._shards / f"{stem}.index", "rb") as handle:
                handle.seek(self._consumed[number])
                blob = handle.read()
        except FileNotFoundError:
            return
        whole = len(blob) - len(blob) % _INDEX.size  # a record still being written waits
        position = 0
        body = _INDEX_BODY.size
        responses, vectors = self._index[RESPONSE], self._index[VECTOR]
        while position < whole:
            kind, key, offset, length, crc = _INDEX.unpack_from(blob, position)
            if crc != zlib.crc32(blob[position : position + body]) or kind not in (1, 2):
                # Not yet visible here (another node's unflushed page) or damaged: stop, retry on
                # the next refresh; until then this shard's later entries are misses.
                self._warn_once(
                    stem,
                    self._consumed[number] + position,
                    "cache: index %s unreadable at byte %d (a write not yet visible, or damage); "
                    "its later entries are misses until it reads back",
                )
                break
            location = (number << (_OFFSET_BITS + _LENGTH_BITS)) | (length << _OFFSET_BITS) | offset
            index = responses if kind == RESPONSE else vectors
            if index.setdefault(key, location) != location:
                self._spare.setdefault((kind, key), []).append(location)
            position += _INDEX.size
        self._consumed[number] += position

    def _warn_once(self, stem: str, position: int, message: str) -> None:
        if (stem, position) not in self._warned:
            self._warned.add((stem, position))
            log.warning(message, self._shards / stem, position)

    def _reader(self, number: int, reopen: bool) -> int | None:
        fd = self._readers.pop(number, None)
        if fd is not None and not reopen:
            self._readers[number] = fd
            return fd
        if fd is not None:
            os.close(fd)
        if len(self._readers) >= _MAX_OPEN_READERS:
            self._close_readers()
        try:
            fd = os.open(self._shards / f"{self._stems[number]}.data", os.O_RDONLY)
        except FileNotFoundError:
            return None
        self._readers[number] = fd
        return fd

    def _read_record(self, kind: int, key: bytes, location: int) -> bytes | None:
        number = location >> (_OFFSET_BITS + _LENGTH_BITS)
        length = (location >> _OFFSET_BITS) & ((1 << _LENGTH_BITS) - 1)
        offset = location & ((1 << _OFFSET_BITS) - 1)
        size = _HEADER.size + length
        for reopen in (False, True):  # a long-open descriptor may not see data written since
            fd = self._reader(number, reopen)
            if fd is None:
                break
            payload = _checked_payload(os.pread(fd, size, offset), kind, key, length)
            if payload is not None:
                return payload
        self._warn_once(
            f"{self._stems[number]}.data",
            offset,
            "cache: record %s at byte %d is incomplete or damaged; treated as a miss",
        )
        return None

    def _lookup(self, kind: int, keys: list[str]) -> dict[str, bytes]:
        """Payloads of the keys that have a whole record (refreshing once for the missing)."""
        index = self._index[kind]
        with self._lock:
            wanted = {key: _key_bytes(key) for key in keys}
            missing = [key for key, raw in wanted.items() if raw not in index]
            if missing and time.monotonic() - self._last_refresh >= self.refresh_interval:
                self.refresh()
            found: dict[str, bytes] = {}
            refreshed = False
            for key, raw in wanted.items():
                location = index.get(raw)
                while location is not None:
                    payload = self._read_record(kind, raw, location)
                    if payload is not None:
                        found[key] = payload
                        break
                    # Try another record of the key; with none left, read what the other shards
                    # gained (``mnemoflow cache compact`` may have moved it to a merged shard),
                    # once per look-up; still none: a miss, and a later put writes one.
                    spare = self._spare.get((kind, raw))
                    if not spare and not refreshed:
                        self.refresh()
                        refreshed = True
                        spare = self._spare.get((kind, raw))
                    location = spare.pop(0) if spare else None
                    if location is None:
                        del index[raw]
                    else:
                        index[raw] = location
            return found

    def get(self, key: str) -> Completion | None:
        if self._memory is not None:
            return self._memory[RESPONSE].get(key)
        payload = self._lookup(RESPONSE, [key]).get(key)
        if payload is None:
            return None
        # [text, model, tokens_in, tokens_out] and, for a reply with function calls, the calls
        text, model, tokens_in, tokens_out, *calls = json.loads(payload)
        return Completion(
            text, model, tokens_in, tokens_out, tool_calls=calls[0] if calls else None
        )

    def get_vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        if self._memory is not None:
            stored = self._memory[VECTOR]
            return {key: stored[key] for key in keys if key in stored}
        return {
            key: np.frombuffer(payload, dtype="<f4").astype(np.float32, copy=False)
            for key, payload in self._lookup(VECTOR, keys).items()
        }

    def count(self) -> int:
        """Chat completions stored, by every process (after reading what others appended)."""
        if self._memory is not None:
            return len(self._memory[RESPONSE])
        self.refresh()
        return len(self._index[RESPONSE])

    # ---- writing -----------------------------------------------------------------------------

    def put(self, key: str, completion: Completion) -> None:
        if self._memory is not None:
            self._memory[RESPONSE].setdefault(key, completion)
            return
        record = [completion.text, completion.model, completion.tokens_in, completion.tokens_out]
        if completion.tool_calls is not None:
            record.append(completion.tool_calls)
        payload = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._append(RESPONSE, [(key, payload)])

    def put_vectors(self, items: dict[str, np.ndarray]) -> None:
        if self._memory is not None:
            for key, vector in items.items():
                self._memory[VECTOR].setdefault(key, np.asarray(vector, dtype=np.float32))
            return
        self._append(
            VECTOR,
            [(key, np.asarray(vec, dtype="<f4").tobytes()) for key, vec in items.items()],
        )

    def _append(self, kind: int, items: list[tuple[str, bytes]]) -> None:
        """Append whole records to this process's shard: data first, then its index records.

        A write that fails closes the shard (its half-written tail stays unindexed) and is tried
        once more in a new shard: on NFS a pair removed by ``mnemoflow cache compact`` from
        another node fails with a stale handle before this process sees it is gone.
        """
        index = self._index[kind]
        with self._lock:
            for attempt in (1, 2):
                writer = self._own_writer()
                data, entries, size = [], [], writer.size
                for key, payload in items:
                    raw = _key_bytes(key)
                    if raw in index:
                        continue  # first record wins, as INSERT OR IGNORE did
                    digest = _digest(kind, raw, payload)
                    data.append(_HEADER.pack(MAGIC, kind, raw, len(payload), digest))
                    data.append(payload)
                    body = _INDEX_BODY.pack(kind, raw, size, len(payload))
                    entries.append(
                        (raw, size, len(payload), body + struct.pack("<I", zlib.crc32(body)))
                    )
                    size += _HEADER.size + len(payload)
                if not entries:
                    return
                try:
                    _write_all(writer.data, b"".join(data))
                    _write_all(writer.index, b"".join(entry[3] for entry in entries))
                except OSError as exc:
                    self._close_writer()
                    if attempt == 2:
                        raise
                    log.warning("cache: writing a shard failed (%s); writing to a new one", exc)
                    continue
                writer.size = size
                high = writer.number << (_OFFSET_BITS + _LENGTH_BITS)
                for raw, offset, length, _ in entries:
                    index.setdefault(raw, high | (length << _OFFSET_BITS) | offset)
                return

    def _own_writer(self) -> _Writer:
        writer = self._writer
        if writer is not None and writer.pid == os.getpid() and _still_linked(writer.data):
            return writer
        if writer is not None and writer.pid == os.getpid():
            # Removed under us (a compaction that took this writer for finished): what it held
            # is in the merged shard; appending to the unlinked file would lose every new entry.
            log.warning(
                "cache: shard %s was removed; writing to a new one", self._stems[writer.number]
            )
            self._close_writer()
        self._writer = None  # a forked child never appends to its parent's shard
        host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:40] or "host"
        stem = f"{host}-{os.getpid()}-{secrets.token_hex(4)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        data = os.open(self._shards / f"{stem}.data", flags, 0o666)
        index = os.open(self._shards / f"{stem}.index", flags, 0o666)
        self._writer = _Writer(self._add_shard(stem), data, index, 0, os.getpid())
        return self._writer

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None and writer.pid == os.getpid():
            os.close(writer.data)
            os.close(writer.index)

    def _close_readers(self) -> None:
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()

    # ---- the old SQLite cache ----------------------------------------------------------------

    def _import_sqlite(self, legacy: Path) -> None:
        """Copy an old SQLite cache's entries in, once (a repeated import skips stored keys)."""
        assert self.directory is not None
        done = self.directory / f"imported-{legacy.name}"
        if done.exists():
            return
        claim = self.directory / f".importing-{legacy.name}"
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            if time.time() - claim.stat().st_mtime < STALE_CLAIM_S:
                log.info(
                    "cache: another job is importing %s; its entries appear as it goes", legacy
                )
                return
        try:
            responses, vectors = read_sqlite_cache(legacy)
            n_responses = n_vectors = 0
            for key, completion in responses:
                self.put(key, completion)
                n_responses += 1
            batch: dict[str, np.ndarray] = {}
            for key, vector in vectors:
                batch[key] = vector
                n_vectors += 1
                if len(batch) == 1000:
                    self.put_vectors(batch)
                    batch = {}
            self.put_vectors(batch)
        except sqlite3.DatabaseError as exc:
            log.warning(
                "cache: %s is not a readable SQLite cache (%s); nothing imported", legacy, exc
            )
            return
        tmp = done.with_name(f".{done.name}.{secrets.token_hex(4)}")
        tmp.write_text(f"{n_responses} replies, {n_vectors} vectors from {legacy}\n")
        os.replace(tmp, done)
        log.info(
            "cache: imported %d replies and %d vectors from %s into %s",
            n_responses,
            n_vectors,
            legacy,
            self.directory,
        )

    def close(self) -> None:
        with self._lock:
            self._close_writer()
            self._close_readers()


def _still_linked(fd: int) -> bool:
    """Whether the file open as ``fd`` still has a name (a stale NFS handle counts as gone)."""
    try:
        return os.fstat(fd).st_nlink > 0
    except OSError:
        return False


def shard_records(shards: Path, stem: str) -> Iterator[tuple[int, bytes, bytes]]:
    """The whole records of one shard pair in index order, as ``(kind, key, payload)``: exactly
    what a reader could serve from it (an index record that does not check stops the shard, as
    it stops a reader; a data record that does not check is skipped, as a reader skips it)."""
    index = (shards / f"{stem}.index").read_bytes()
    with open(shards / f"{stem}.data", "rb") as data:
        for position in range(0, len(index) - len(index) % _INDEX.size, _INDEX.size):
            kind, key, offset, length, crc = _INDEX.unpack_from(index, position)
            if crc != zlib.crc32(index[position : position + _INDEX_BODY.size]) or kind not in (
                RESPONSE,
                VECTOR,
            ):
                return
            data.seek(offset)
            payload = _checked_payload(data.read(_HEADER.size + length), kind, key, length)
            if payload is not None:
                yield kind, key, payload


def _write_all(fd: int, blob: bytes) -> None:
    view = memoryview(blob)
    while view:
        view = view[os.write(fd, view) :]
