"""Long-running processes this package starts (SLURM daemons, the local LLM server) and stops.

A process is identified by its PID *and* its kernel start time, recorded when it is started, so
stopping it later can never hit an unrelated process that reused the PID. Processes are started
in their own session (setsid), so they outlive the command that started them and a Ctrl-C in
that terminal does not reach them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Daemon:
    """A process we started: name, PID, kernel start time (clock ticks) and its log file."""

    name: str
    pid: int
    start_ticks: int
    log: str

    def to_dict(self) -> dict:
        return asdict(self)


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may contain spaces and parens
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_running(daemon: Daemon) -> bool:
    """True only for the very process that was started (same PID and same start time)."""
    return start_ticks(daemon.pid) == daemon.start_ticks


def log_tail(path: str | Path, lines: int = 5) -> str:
    """The last lines of a log, joined on one line for an error message."""
    try:
        text = Path(path).read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return " | ".join(text.splitlines()[-lines:]) or "(empty log)"


def start(name: str, command: list[str], log: Path, user: str | None = None) -> Daemon:
    """Start ``command`` in a new session with stdout+stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user,
        )
    ticks = None
    for _ in range(100):  # /proc can lag the fork by a moment
        ticks = start_ticks(process.pid)
        if ticks is not None or process.poll() is not None:
            break
        time.sleep(0.02)
    if ticks is None:
        raise OSError(f"{name} exited at once (status {process.poll()}): {log_tail(log)}")
    return Daemon(name, process.pid, ticks, str(log))


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our own child (else it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(daemon: Daemon, timeout: float = 15.0) -> bool:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; False when it was not running."""
    if not is_running(daemon):
        _reap(daemon.pid)
        return False
    os.kill(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(daemon.pid)
        if not is_running(daemon):
            return True
        time.sleep(0.1)
    os.kill(daemon.pid, signal.SIGKILL)
    for _ in range(50):
        _reap(daemon.pid)
        if not is_running(daemon):
            break
        time.sleep(0.1)
    return True


def write_json(path: Path, data: dict) -> None:
    """Write a small state file atomically (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
