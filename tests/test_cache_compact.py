"""``mnemoflow cache compact``: shard pairs merged into one, every entry served as before."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from mnemoflow.cli import main
from mnemoflow.llm.cache import ResponseCache, cache_key
from mnemoflow.llm.cache_compact import CacheBusy, compact
from mnemoflow.llm.types import Completion

KEYS = [cache_key({"k": i}) for i in range(8)]
VECTOR = cache_key({"v": 1})


def _put(directory, name: str, replies: dict[int, str], vector=None) -> None:
    """The shard pair of a job that ran beside the others (it saw none of their entries, so it
    may store a key they store too), named ``name`` to fix the readers' order."""
    scratch = directory.parent / f"scratch-{name}"
    cache = ResponseCache(scratch)
    for i, text in replies.items():
        cache.put(KEYS[i], Completion(text, "m", i, 1))
    if vector is not None:
        cache.put_vectors({VECTOR: np.asarray(vector, dtype=np.float32)})
    cache.close()
    (directory / "shards").mkdir(parents=True, exist_ok=True)
    for path in (scratch / "shards").iterdir():
        os.rename(path, directory / "shards" / f"{name}{path.suffix}")


def _served(directory) -> dict:
    """What a newly opened cache serves for every key."""
    cache = ResponseCache(directory)
    got = {i: (c.text if (c := cache.get(key)) else None) for i, key in enumerate(KEYS)}
    vectors = cache.get_vectors([VECTOR])
    got["vector"] = vectors[VECTOR].tolist() if vectors else None
    cache.close()
    return got


def _shards(directory) -> list[str]:
    return sorted(p.name for p in (directory / "shards").iterdir())


def _three_writers(directory) -> None:
    """a: k0, k1, the vector; b: k1 again (asked at once, another reply), k2; c: k3, k4, then
    k3's payload damaged (a miss already)."""
    _put(directory, "a-1-0000", {0: "a0", 1: "a1"}, vector=[0.5, 2.0])
    _put(directory, "b-1-0000", {1: "b1", 2: "b2"})
    _put(directory, "c-1-0000", {3: "c3", 4: "c4"})
    data = directory / "shards" / "c-1-0000.data"
    blob = bytearray(data.read_bytes())
    blob[60] ^= 0xFF  # inside k3's payload (after the 57-byte header)
    data.write_bytes(bytes(blob))


def test_compaction_merges_every_pair_into_one_and_serves_the_same_replies(tmp_path):
    directory = tmp_path / "llm"
    _three_writers(directory)
    before = _served(directory)
    assert before == {
        0: "a0",
        1: "a1",  # the first pair in name order wins, for every newly opened cache
        2: "b2",
        3: None,  # damaged: a miss
        4: "c4",
        5: None,
        6: None,
        7: None,
        "vector": [0.5, 2.0],
    }
    report = compact(directory, min_age=0)
    assert (report.merged_shards, report.responses, report.vectors) == (3, 4, 1)
    assert (report.duplicates, report.unreadable, report.kept_sources) == (1, 1, [])
    assert _shards(directory) == [f"{report.merged}.data", f"{report.merged}.index"]
    assert report.merged.startswith("+merged-")
    # index: 5 records of 49 bytes; data: 4 replies + 1 vector of 8 bytes, each + 57 of header
    assert report.bytes_after == 5 * 49 + sum(57 + n for n in (14, 14, 14, 14, 8))
    assert report.bytes_after < report.bytes_before
    assert _served(directory) == before

    # A pair that repeats k1 with another reply (a job that ran beside the first ones) and sorts
    # before every writer's name: the merged pair still comes first.
    _put(directory, "0-1-0000", {1: "late", 5: "d5"})
    assert _served(directory)[1] == "a1"
    again = compact(directory, min_age=0)
    assert (again.merged_shards, again.responses, again.duplicates) == (2, 5, 1)
    assert _served(directory) == {**before, 5: "d5"}
    assert len(_shards(directory)) == 2


def test_a_cache_opened_before_the_compaction_serves_everything_after_it(tmp_path):
    """Its index points into the removed pairs: it reads on from a data file it holds open, and
    a failed read re-reads the shard list and finds the merged pair, never a miss (which would
    ask the model again)."""
    directory = tmp_path / "llm"
    _three_writers(directory)
    reader = ResponseCache(directory)
    assert reader.get(KEYS[0]).text == "a0"  # it holds a's data file open: no writer, no refusal
    assert compact(directory, min_age=0).merged_shards == 3
    got = {i: (c.text if (c := reader.get(key)) else None) for i, key in enumerate(KEYS[:5])}
    assert got == {0: "a0", 1: "a1", 2: "b2", 3: None, 4: "c4"}
    assert reader.get_vectors([VECTOR])[VECTOR].tolist() == [0.5, 2.0]
    reader.close()
    assert len(_shards(directory)) == 2  # it wrote nothing


def test_a_writer_whose_pair_was_removed_writes_a_new_one(tmp_path):
    directory = tmp_path / "llm"
    writer = ResponseCache(directory)
    writer.put(KEYS[0], Completion("first", "m", 1, 1))
    for path in (directory / "shards").iterdir():
        path.unlink()  # what a compaction does to a pair it took for finished
    writer.put(KEYS[1], Completion("second", "m", 1, 1))
    writer.close()
    assert _served(directory)[1] == "second"


def test_compaction_refuses_while_a_job_may_write(tmp_path):
    directory = tmp_path / "llm"
    _three_writers(directory)
    # A shard changed a moment ago, perhaps by a job on another node.
    with pytest.raises(CacheBusy, match=r"a-1-0000\.data: changed \d+ s ago \(min age 600 s\)"):
        compact(directory)
    hour_ago = time.time() - 3600
    for path in (directory / "shards").iterdir():
        os.utime(path, (hour_ago, hour_ago))
    # A writer of this host still holds its pair open, however old its last write.
    writer = ResponseCache(directory)
    writer.put(KEYS[6], Completion("open", "m", 1, 1))
    with pytest.raises(CacheBusy, match="open for writing in a process of this host"):
        compact(directory, min_age=0)
    assert len(_shards(directory)) == 8
    writer.close()
    assert compact(directory, min_age=0).merged_shards == 4


def test_the_command_prints_one_line_and_refuses_in_one_line(tmp_path, capsys):
    directory = tmp_path / "llm"
    _three_writers(directory)
    assert main(["cache", "compact", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mnemoflow cache: error: ") and err.count("\n") == 1
    assert main(["cache", "compact", str(directory), "--min-age", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("merged 3 shard pairs into +merged-") and out.count("\n") == 1
    assert "4 replies, 1 vectors, 1 duplicate and 1 unreadable records dropped" in out
    # the old config name of the cache resolves to the same directory
    assert main(["cache", "compact", str(tmp_path / "llm.sqlite"), "--min-age", "0"]) == 0
    assert capsys.readouterr().out.startswith("merged 0 shard pairs")


def test_a_write_that_fails_once_goes_to_a_new_pair(tmp_path, monkeypatch):
    """On NFS a pair removed from another node fails with a stale handle (ESTALE) on the next
    write, before this process sees that it is gone: the entry goes to a new pair, not lost."""
    import errno

    from mnemoflow.llm import cache as cache_module

    directory = tmp_path / "llm"
    writer = ResponseCache(directory)
    writer.put(KEYS[0], Completion("first", "m", 1, 1))
    real, failures = cache_module._write_all, []

    def stale_once(fd, blob):
        if not failures:
            failures.append(fd)
            raise OSError(errno.ESTALE, "Stale file handle")
        real(fd, blob)

    monkeypatch.setattr(cache_module, "_write_all", stale_once)
    writer.put(KEYS[1], Completion("second", "m", 1, 1))
    writer.close()
    assert len(failures) == 1
    assert [_served(directory)[i] for i in (0, 1)] == ["first", "second"]
    assert len(_shards(directory)) == 4  # the first pair, and the one the retry opened
