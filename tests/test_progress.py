"""Progress bars: counts, cache hits and rate; in logs a few lines, never one per item."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace

import pytest
from tqdm import tqdm

from mnemoflow.jobs import progress as progress_module
from mnemoflow.jobs.progress import gather, is_quiet, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A fake clock for tqdm, advanced by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr("tqdm.std.time", fake)
    monkeypatch.setattr(tqdm, "monitor_interval", 0)  # no background refresh thread
    monkeypatch.delenv("MNEMOFLOW_PROGRESS", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    return fake


def test_quiet_when_not_a_terminal_or_on_ci():
    assert is_quiet(io.StringIO(), environ={}) is True
    assert is_quiet(Terminal(), environ={}) is False
    assert is_quiet(Terminal(), environ={"CI": "true"}) is True
    assert is_quiet(Terminal(), environ={"CI": "false"}) is False


def test_a_log_gets_one_line_per_interval_not_per_item(clock):
    """600 items, one per second, 10 s interval: 60 progress lines plus the first and last."""
    log = io.StringIO()
    with progress(600, "answer locomo/bm25", file=log) as bar:
        for i in range(600):
            clock.now += 1.0
            bar.update(cache_hit=i % 4 == 0)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert 55 <= len(lines) <= 65
    # 150 of 600 were hits; 600 items in 600 s is 1 call per second; nothing left to wait.
    assert lines[-1] == (
        "answer locomo/bm25: 600/600 (100%) elapsed 10:00, ETA 00:00, 1.00 calls/s, "
        "cache hits 150 (25%)"
    )
    assert "ETA 08:20" in lines[10]  # after 100 s, 100 done: 500 left at 1 per second


def test_a_burst_of_fast_items_prints_two_lines(clock):
    log = io.StringIO()
    with progress(1000, "judge", file=log) as bar:
        for _ in range(1000):
            bar.update(cache_hit=True)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2  # the start and the end, whatever the number of items
    assert lines[-1].startswith("judge: 1000/1000 (100%)")
    assert lines[-1].endswith("cache hits 1000 (100%)")


def test_a_terminal_gets_a_redrawn_bar(clock):
    screen = Terminal()
    with progress(4, "ingest", file=screen, quiet=False, mininterval=0) as bar:
        for _ in range(4):
            clock.now += 0.5
            bar.update(cache_hit=False)
    text = screen.getvalue()
    assert text.count("\r") >= 4  # redrawn in place
    assert "4/4" in text and "2.00call/s" in text and "cache hits 0 (0%)" in text


def test_cache_hits_can_be_counted_per_batch(clock):
    bar = progress(10, "embed", file=io.StringIO())
    bar.update(4, cache_hit=3)
    bar.update(6, cache_hit=True)
    assert (bar.done, bar.hits) == (10, 9)
    with pytest.raises(ValueError, match="cache_hit count 5 is outside 0..2"):
        bar.update(2, cache_hit=5)
    bar.close()


def test_progress_can_be_switched_off(clock, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_PROGRESS", "off")
    log = io.StringIO()
    with progress(3, "answer", file=log) as bar:
        bar.update(3)
    assert log.getvalue() == ""


def test_gather_keeps_order_and_counts_hits(clock, monkeypatch):
    log = io.StringIO()

    async def call(i: int):
        await asyncio.sleep(0.001 * (5 - i))  # finish in reverse order
        return SimpleNamespace(value=i, cache_hit=i % 2 == 0)

    monkeypatch.setattr(progress_module.sys, "stderr", log)
    results = asyncio.run(gather([call(i) for i in range(5)], "answer"))
    assert [r.value for r in results] == [0, 1, 2, 3, 4]
    assert log.getvalue().splitlines()[-1].endswith("cache hits 3 (60%)")
