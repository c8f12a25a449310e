"""The sharded response cache: writers without a lock, torn records, the old SQLite file."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time

import numpy as np

from mnemoflow.llm.cache import ResponseCache, cache_key
from mnemoflow.llm.sqlite_cache import SqliteResponseCache
from mnemoflow.llm.types import Completion

ROUNDS, PER_ROUND = 6, 40


def _reply(key_name: str) -> Completion:
    return Completion(text=f"reply to {key_name}", model="m", tokens_in=len(key_name), tokens_out=3)


def _names(writer: int, round_: int) -> list[str]:
    """This writer's keys of one round: 30 of its own, 10 that both writers write."""
    own = [f"w{writer}-r{round_}-{i}" for i in range(PER_ROUND - 10)]
    return own + [f"shared-r{round_}-{i}" for i in range(10)]


def _writer(path: str, writer: int, barrier) -> None:
    cache = ResponseCache(path)
    for round_ in range(ROUNDS):
        for name in _names(writer, round_):
            cache.put(cache_key({"q": name}), _reply(name))
        cache.put_vectors({cache_key({"v": f"{writer}-{round_}"}): np.full(3, writer + round_)})
        barrier.wait(timeout=60)
    cache.close()


def _reader(path: str, barrier, errors) -> None:
    """After round r, every entry of rounds <= r must be there and intact, while writers go on."""
    cache = ResponseCache(path, refresh_interval=0)
    for round_ in range(ROUNDS):
        barrier.wait(timeout=60)
        for seen in range(round_ + 1):
            for writer in (0, 1):
                for name in _names(writer, seen):
                    got = cache.get(cache_key({"q": name}))
                    if got is None or (got.text, got.tokens_in) != (f"reply to {name}", len(name)):
                        errors.put(f"round {round_}: {name} -> {got}")
                vector = cache.get_vectors([cache_key({"v": f"{writer}-{seen}"})])
                if [v.tolist() for v in vector.values()] != [[float(writer + seen)] * 3]:
                    errors.put(f"round {round_}: vector {writer}-{seen} -> {vector}")
        # Whatever of the next round is already visible must be whole and right too.
        for writer in (0, 1):
            for name in _names(writer, round_ + 1):
                got = cache.get(cache_key({"q": name}))
                if got is not None and got.text != f"reply to {name}":
                    errors.put(f"round {round_}: early {name} -> {got}")
    cache.close()


def test_two_writers_and_a_reader_in_separate_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "cache")
    context = multiprocessing.get_context("spawn")  # nothing shared but the directory
    barrier, errors = context.Barrier(3), context.Queue()
    processes = [context.Process(target=_writer, args=(path, w, barrier)) for w in (0, 1)]
    processes.append(context.Process(target=_reader, args=(path, barrier, errors)))
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert problems == []
    # 6 rounds x (2 writers x 30 own + 10 shared) = 420 distinct replies; each writer has one shard.
    cache = ResponseCache(path)
    assert cache.count() == ROUNDS * (2 * 30 + 10) == 420
    assert sorted(p.suffix for p in (tmp_path / "cache" / "shards").iterdir()) == [
        ".data",
        ".data",
        ".index",
        ".index",
    ]


def test_record_sizes_worked_example(tmp_path):
    """A reply ["hi","m",1,2] is 14 bytes of JSON: 57-byte header + 14 = 71 bytes; index 49."""
    cache = ResponseCache(tmp_path / "c")
    cache.put(cache_key({"a": 1}), Completion("hi", "m", 1, 2))
    cache.put(cache_key({"a": 1}), Completion("other", "m", 1, 2))  # first record wins
    cache.put_vectors({cache_key({"v": 1}): np.array([1.0, 2.0], dtype=np.float32)})  # 57 + 8
    cache.close()
    (data,) = (tmp_path / "c" / "shards").glob("*.data")
    assert data.stat().st_size == 71 + 65
    assert data.with_suffix(".index").stat().st_size == 2 * 49
    assert ResponseCache(tmp_path / "c").get(cache_key({"a": 1})).text == "hi"


def _shard_holding(directory, *replies: str) -> tuple:
    """A closed cache whose replies to keys {"a": 1}, {"a": 2}, ... are ``replies``: the data and
    index files of its one shard."""
    cache = ResponseCache(directory)
    for number, text in enumerate(replies, start=1):
        cache.put(cache_key({"a": number}), Completion(text, "m", 1, 1))
    cache.close()
    (data,) = (directory / "shards").glob("*.data")
    return data, data.with_suffix(".index")


def test_torn_tail_records_are_ignored_and_the_key_can_be_written_again(tmp_path):
    data, index = _shard_holding(tmp_path / "c", "one", "two")
    whole_index = index.read_bytes()
    # A writer killed mid-record: half a data record and 20 of an index record's 49 bytes.
    with open(data, "ab") as handle:
        handle.write(data.read_bytes()[:40])
    with open(index, "ab") as handle:
        handle.write(whole_index[:20])
    reader = ResponseCache(tmp_path / "c")
    assert reader.count() == 2
    assert reader.get(cache_key({"a": 1})).text == "one"
    assert reader.get(cache_key({"a": 3})) is None
    reader.put(cache_key({"a": 3}), Completion("three", "m", 1, 1))
    assert ResponseCache(tmp_path / "c").get(cache_key({"a": 3})).text == "three"


def test_a_damaged_record_is_a_logged_miss_then_rewritten(tmp_path, caplog):
    data, _ = _shard_holding(tmp_path / "c", "intact reply", "second")
    blob = bytearray(data.read_bytes())
    blob[60] ^= 0xFF  # inside the first payload (after the 57-byte header)
    data.write_bytes(bytes(blob))
    reader = ResponseCache(tmp_path / "c")
    with caplog.at_level(logging.WARNING, logger="mnemoflow.llm.cache"):
        assert reader.get(cache_key({"a": 1})) is None
    assert "incomplete or damaged; treated as a miss" in caplog.text
    assert reader.get(cache_key({"a": 2})).text == "second"
    reader.put(cache_key({"a": 1}), Completion("asked again", "m", 1, 1))
    assert reader.get(cache_key({"a": 1})).text == "asked again"
    assert ResponseCache(tmp_path / "c").get(cache_key({"a": 1})).text == "asked again"


def test_an_index_record_whose_data_is_not_visible_yet_is_a_miss(tmp_path):
    """On NFS another node may see the index record before the data page: not an entry."""
    data, _ = _shard_holding(tmp_path / "c", "one", "two")
    os.truncate(data, data.stat().st_size - 2)  # the second record's last 2 bytes not there
    reader = ResponseCache(tmp_path / "c")
    assert reader.get(cache_key({"a": 1})).text == "one"
    assert reader.get(cache_key({"a": 2})) is None


def _write_forever(path: str, ready) -> None:
    cache = ResponseCache(path)
    i = 0
    while True:
        cache.put(cache_key({"i": i}), Completion(f"reply {i} " + "x" * (i % 500), "m", i, 1))
        if i % 7 == 0:
            cache.put_vectors({cache_key({"v": i}): np.full(64, float(i), dtype=np.float32)})
        if i == 200:
            ready.set()
        i += 1


def test_a_writer_killed_mid_write_leaves_only_whole_entries(tmp_path):
    path = str(tmp_path / "c")
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    process = context.Process(target=_write_forever, args=(path, ready))
    process.start()
    assert ready.wait(timeout=60)
    time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=30)
    cache = ResponseCache(path)
    n = cache.count()
    assert n > 200
    # Every indexed entry reads back whole and right: replies 0..n-1, vectors of multiples of 7.
    for i in range(n):
        got = cache.get(cache_key({"i": i}))
        assert (got.text, got.tokens_in) == (f"reply {i} " + "x" * (i % 500), i)
    vectors = cache.get_vectors([cache_key({"v": i}) for i in range(0, n, 7)])
    for i in range(0, n - 7, 7):  # the last one may have been cut off with the kill
        assert vectors[cache_key({"v": i})].tolist() == [float(i)] * 64


def test_a_config_naming_the_old_sqlite_file_imports_it_once(tmp_path, caplog):
    old = tmp_path / "llm.sqlite"
    legacy = SqliteResponseCache(old)
    legacy.put(cache_key({"a": 1}), Completion("from sqlite", "m", 4, 2))
    legacy.put_vectors({cache_key({"v": 1}): np.array([0.5, 1.5], dtype=np.float32)})
    legacy.close()
    with caplog.at_level(logging.INFO, logger="mnemoflow.llm.cache"):
        cache = ResponseCache(old)
    assert cache.directory == tmp_path / "llm"
    got = cache.get(cache_key({"a": 1}))
    assert (got.text, got.model, got.tokens_in, got.tokens_out) == ("from sqlite", "m", 4, 2)
    assert cache.get_vectors([cache_key({"v": 1})])[cache_key({"v": 1})].tolist() == [0.5, 1.5]
    assert "names a SQLite cache file; the cache is now the directory" in caplog.text
    assert "imported 1 replies and 1 vectors" in caplog.text
    cache.close()
    ResponseCache(old).close()  # a second open finds the marker and imports nothing
    assert len(list((tmp_path / "llm" / "shards").glob("*.data"))) == 1
    assert (tmp_path / "llm" / "imported-llm.sqlite").exists()


def test_in_memory_cache_without_a_path():
    cache = ResponseCache(None)
    cache.put("k", Completion("a", "m", 1, 1))
    cache.put("k", Completion("b", "m", 1, 1))
    cache.put_vectors({"v": np.ones(2)})
    assert (cache.get("k").text, cache.count(), cache.get("missing")) == ("a", 1, None)
    assert cache.get_vectors(["v", "w"])["v"].dtype == np.float32


def test_cache_key_is_the_sha256_of_the_sorted_compact_json_however_messages_are_encoded():
    # Keys must never change (every cache on disk is keyed by them): the spliced, per-message
    # encoding of a growing history hashes exactly the text json.dumps gives for the payload.
    import hashlib
    import json

    def plain(payload):
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    history = [{"role": "system", "content": 'Quote " and é, \u2028 and 😀\n'}]
    tool = {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]}
    for turn in range(4):  # the same history again and again, one message longer each time
        history.append({"role": "user" if turn % 2 else "assistant", "content": f"turn {turn}"})
        payload = {
            "backend": "openai",
            "model": "m",
            "messages": [*history, tool],
            "sampling": {"temperature": 0.0},
            "fields": {"messages": "not the messages"},
            "task": "t",
        }
        assert cache_key(payload) == plain(payload)
    for payload in (
        {"a": 1},
        {"messages": "text"},
        {"messages": []},
        {"messages": [{"role": "u"}]},
    ):
        assert cache_key(payload) == plain(payload)
