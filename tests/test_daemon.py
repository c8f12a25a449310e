"""Processes started and stopped by PID + start time (never by name)."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from mnemoflow.ops import daemon


@pytest.fixture()
def sleeper(tmp_path):
    proc = daemon.start("sleeper", [shutil.which("sleep"), "30"], tmp_path / "sleep.log")
    yield proc
    daemon.stop(proc, timeout=2)


def test_start_records_pid_and_start_time_then_stop_ends_it(sleeper):
    assert daemon.is_running(sleeper)
    assert daemon.start_ticks(sleeper.pid) == sleeper.start_ticks
    assert daemon.stop(sleeper, timeout=5) is True
    assert not daemon.is_running(sleeper)
    assert daemon.stop(sleeper, timeout=5) is False  # already gone: nothing to stop


def test_a_recycled_pid_is_not_ours(sleeper):
    impostor = daemon.Daemon("sleeper", sleeper.pid, sleeper.start_ticks + 1, sleeper.log)
    assert not daemon.is_running(impostor)
    assert daemon.stop(impostor) is False  # and it is never signalled
    assert daemon.is_running(sleeper)


def test_a_program_that_dies_is_seen_dead_and_its_log_explains(tmp_path):
    log = tmp_path / "bad.log"
    try:
        proc = daemon.start("bad", ["/bin/sh", "-c", "echo boom; exit 3"], log)
    except OSError as exc:  # it may already be gone when its start time is read
        assert "boom" in str(exc)
        return
    for _ in range(100):
        if not daemon.is_running(proc):
            break
        time.sleep(0.02)
    assert not daemon.is_running(proc)
    assert daemon.log_tail(log) == "boom"


def test_a_missing_program_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        daemon.start("nothing", [str(tmp_path / "no-such-program")], tmp_path / "n.log")


def test_write_json_is_whole(tmp_path):
    path = tmp_path / "state" / "x.json"
    daemon.write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
