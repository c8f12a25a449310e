"""Managed endpoints: a model server the workflow starts, publishes, and stops by itself.

A job whose roles bind ``endpoint: NAME`` (a managed endpoint, config ``endpoints.NAME.serve``)
calls :func:`ensure` when it builds its gateway:

1. it takes a *lease* (``results/endpoints/NAME.leases/<host>-<pid>-<token>``, touched every
   :data:`LEASE_BEAT_S` seconds while the job runs, removed when its gateway closes);
2. when ``results/endpoints/NAME.json`` names a server that is ready and answers, it uses it;
3. otherwise the first job to take ``NAME.lock`` launches a *supervisor*
   (``python -m mnemoflow.ops.endpoints supervise``): on SLURM (the job runs inside one) as a
   job of its own, ``sbatch`` with the endpoint's GPUs, CPUs, memory and time limit; elsewhere as
   a process in its own session. Every job waits until the state file says ``ready`` (or why not).

The supervisor picks a free port on its node, runs the ``serve`` command with it (its output in
``results/logs/endpoints/NAME.log``), polls ``GET /v1/models`` until it answers (at most
``ready_timeout_s``), writes ``NAME.json`` ``{state: ready, base_url, host, port, pid, jobid}``,
and then watches: it stops the server when no lease has been live for ``idle_timeout_s``, when
``NAME.stop`` appears (the workflow's end, :func:`stop_all`), after ``time_limit_min``, or on
SIGTERM (SLURM's own time limit, scancel); when the server exits by itself it records ``died``.
A job whose calls then fail is told in one line (:func:`why_down`) naming the endpoint and its
log; the next job or rerun that needs it starts it again, and the response cache (never keyed by
the address) serves what was already answered.

Everything lives in files under the working directory, so it works the same on one machine and
across the nodes of a cluster with a shared file system. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemoflow.layout import ENDPOINT_LOGS, ENDPOINTS

#: Where state files and logs live, relative to the workflow's working directory.
STATE_DIR = Path(ENDPOINTS)
LOG_DIR = Path(ENDPOINT_LOGS)
#: A lease is live while touched within LEASE_STALE_S; jobs touch theirs every LEASE_BEAT_S.
LEASE_BEAT_S = 5.0
LEASE_STALE_S = 30.0
#: The supervisor rewrites its state at least this often; older than SUPERVISOR_STALE_S: gone.
BEAT_S = 2.0
SUPERVISOR_STALE_S = 30.0
#: A start lock older than this was left by a job that died while launching.
LOCK_STALE_S = 60.0
RUNNING = ("queued", "starting", "ready", "stopping")


class EndpointDown(RuntimeError):
    """A managed endpoint could not be started or stopped answering: one line naming it and its
    log."""


def state_path(name: str, root: Path = STATE_DIR) -> Path:
    return Path(root) / f"{name}.json"


def log_path(name: str, logs: Path = LOG_DIR) -> Path:
    return Path(logs) / f"{name}.log"


def read_state(name: str, root: Path = STATE_DIR) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(name, root).read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def answers(base_url: str, timeout: float = 3.0) -> bool:
    """Whether ``GET base_url/models`` answers with JSON (the server is up)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout) as reply:
            json.loads(reply.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return True


def address(state: dict[str, Any]) -> str:
    """The server's base_url as seen from this node: loopback on its own node (a server that
    binds 127.0.0.1 only is reachable there), its host name from every other node."""
    host = "127.0.0.1" if state.get("host") == socket.gethostname() else state["host"]
    return f"http://{host}:{state['port']}/v1"


def _supervisor_alive(state: dict[str, Any]) -> bool:
    if state.get("state") == "queued":
        return slurm_job_active(state.get("jobid"))
    if state.get("host") == socket.gethostname() and state.get("pid"):
        try:  # on its own node a dead process is seen at once, not after SUPERVISOR_STALE_S
            stat = Path(f"/proc/{int(state['pid'])}/stat").read_text()
        except OSError:
            return False
        if stat[stat.rindex(")") + 2 :].startswith("Z"):
            return False
    return time.time() - float(state.get("beat", 0)) < SUPERVISOR_STALE_S


def slurm_job_active(jobid: str | None) -> bool:
    if not jobid:
        return False
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", str(jobid), "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return True  # cannot tell: keep waiting, the time limit still holds
    return out in ("PENDING", "CONFIGURING", "RUNNING")


def why_down(
    name: str, root: Path = STATE_DIR, logs: Path = LOG_DIR, settle_s: float = 5.0
) -> str | None:
    """One line naming the endpoint, what became of it and its log, when it does not run and
    answer; None while it does. A server that stopped answering a moment ago is given
    ``settle_s`` for its supervisor to record why (it looks twice a second)."""
    settle_by = time.monotonic() + settle_s
    while True:
        state = read_state(name, root) or {}
        what = state.get("state", "never started")
        if what != "ready" or not _supervisor_alive(state):
            break
        if answers(address(state)):
            return None
        if time.monotonic() > settle_by:
            what = "stopped answering"
            break
        time.sleep(0.25)
    log = state.get("log") or str(log_path(name, logs))
    reason = f": {state['reason']}" if state.get("reason") else ""
    return (
        f"endpoint {name} (managed) is not running ({what}{reason}); its log: {log}; "
        "a rerun starts it again"
    )


# --- the jobs' side: ensure a server, hold a lease ---------------------------------------------


@dataclass
class Lease:
    """A job's hold on a running managed endpoint: its address, why it went down, release()."""

    name: str
    url: str
    path: Path
    root: Path
    logs: Path
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        thread = threading.Thread(target=self._beat, name=f"lease-{self.name}", daemon=True)
        thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(LEASE_BEAT_S):
            with contextlib.suppress(OSError):
                self.path.touch()

    def down(self) -> str | None:
        return why_down(self.name, self.root, self.logs)

    def release(self) -> None:
        self._stop.set()
        self.path.unlink(missing_ok=True)


def _take_lease(name: str, root: Path) -> Path:
    folder = Path(root) / f"{name}.leases"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.touch()
    return path


def _lock(name: str, root: Path) -> bool:
    path = Path(root) / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > LOCK_STALE_S:
                path.unlink()
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{socket.gethostname()} {os.getpid()}\n")
    return True


def _unlock(name: str, root: Path) -> None:
    (Path(root) / f"{name}.lock").unlink(missing_ok=True)


def ensure(
    name: str,
    spec: dict[str, Any],
    root: Path = STATE_DIR,
    logs: Path = LOG_DIR,
    environ: dict[str, str] | None = None,
) -> Lease:
    """A lease on the running endpoint ``name``, started first when nothing serves it.

    Raises :class:`EndpointDown` (one line naming the endpoint and its log) when it cannot be
    started or does not answer within ``ready_timeout_s`` of its start.
    """
    environ = dict(os.environ if environ is None else environ)
    root, logs = Path(root), Path(logs)
    lease = _take_lease(name, root)  # before reading: an idle supervisor sees it and stays
    try:
        launched = False
        deadline = None
        while True:
            state = read_state(name, root) or {}
            what = state.get("state")
            alive = what in RUNNING and _supervisor_alive(state)
            if what == "ready" and alive and answers(address(state)):
                return Lease(name, address(state), lease, root, logs)
            if not alive:
                if launched:  # the server this job started is gone: why, in one line
                    raise EndpointDown(why_down(name, root, logs) or f"endpoint {name}: gone")
                if _lock(name, root):
                    try:
                        again = read_state(name, root) or {}
                        if not (again.get("state") in RUNNING and _supervisor_alive(again)):
                            launch(name, spec, root, logs, environ)
                            launched = True
                    finally:
                        _unlock(name, root)
            elif what == "queued":
                deadline = None  # waiting for the scheduler counts against no timeout
            elif deadline is None:
                deadline = time.monotonic() + float(spec.get("ready_timeout_s", 600)) + 30.0
            if deadline is not None and time.monotonic() > deadline:
                raise EndpointDown(
                    f"endpoint {name} (managed) did not answer within ready_timeout_s of its "
                    f"start; its log: {state.get('log') or log_path(name, logs)}"
                )
            time.sleep(0.25)
    except BaseException:
        lease.unlink(missing_ok=True)
        raise


def supervisor_command(name: str, spec: dict[str, Any], root: Path, logs: Path) -> list[str]:
    return [
        sys.executable, "-m", "mnemoflow.ops.endpoints", "supervise", name,
        "--spec", json.dumps(spec), "--root", str(root), "--logs", str(logs),
    ]  # fmt: skip


def sbatch_command(name: str, spec: dict[str, Any], root: Path, logs: Path) -> list[str]:
    """The server's own SLURM job: the endpoint's GPUs, CPUs, memory and time limit."""
    command = sbatch_options(f"mnemoflow-endpoint-{name}", spec, log_path(name, logs))
    return [*command, "--wrap", shlex.join(supervisor_command(name, spec, root, logs))]


def sbatch_options(job_name: str, spec: dict[str, Any], log: Path) -> list[str]:
    """``sbatch`` with a managed endpoint's resources (GPUs, CPUs, memory, time limit,
    partition, account), its output appended to ``log``; the command to wrap goes last."""
    command = [
        "sbatch", "--parsable", f"--job-name={job_name}",
        f"--output={log}", "--open-mode=append", f"--chdir={os.getcwd()}",
        f"--time={max(1, math.ceil(float(spec['time_limit_min'])))}",
        f"--cpus-per-task={int(spec['cpus'])}", f"--mem={int(spec['mem_mb'])}",
    ]  # fmt: skip
    if spec.get("gpus"):
        command.append(f"--gres=gpu:{int(spec['gpus'])}")
    if spec.get("slurm_partition"):
        command.append(f"--partition={spec['slurm_partition']}")
    if spec.get("slurm_account"):
        command.append(f"--account={spec['slurm_account']}")
    return command


def job_spec(spec: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """``spec`` with the partition of the SLURM job that submits it when it names none."""
    partition = environ.get("SLURM_JOB_PARTITION")
    if partition and not spec.get("slurm_partition"):
        return {**spec, "slurm_partition": partition}
    return spec


def sbatch(command: list[str], environ: dict[str, str]) -> str:
    """Submit ``command`` from inside a SLURM job; its job id. The job's own SLURM_* settings
    (CPUs, memory, its job id) must not shape the new job's. Raises ``RuntimeError`` with
    sbatch's own words."""
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith(("SLURM_", "SBATCH_")) or k == "SLURM_CONF"
    }
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {' '.join(done.stderr.split())}")
    return done.stdout.strip().split(";")[0]


def launch(
    name: str, spec: dict[str, Any], root: Path, logs: Path, environ: dict[str, str]
) -> dict[str, Any]:
    """Start the supervisor: a SLURM job when this runs inside one, else a process."""
    log = log_path(name, logs)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting endpoint {name}\n")
    (Path(root) / f"{name}.stop").unlink(missing_ok=True)
    state = {"name": name, "log": str(log), "beat": time.time(), "reason": None}
    if "SLURM_JOB_ID" in environ:
        spec = job_spec(spec, environ)
        try:
            jobid = sbatch(sbatch_command(name, spec, root, logs), environ)
        except RuntimeError as exc:
            raise EndpointDown(f"endpoint {name} (managed): {exc}") from None
        state.update(state="queued", jobid=jobid)
    else:
        with open(log, "ab") as out:
            process = subprocess.Popen(
                supervisor_command(name, spec, root, logs),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=environ,
            )
        state.update(state="starting", host=socket.gethostname(), pid=process.pid)
    _write(state_path(name, root), state)
    return state


def stop_all(root: Path = STATE_DIR, wait_s: float = 30.0) -> list[str]:
    """Ask every managed endpoint that runs to stop (the workflow's end); the names asked."""
    root = Path(root)
    asked = []
    for path in sorted(root.glob("*.json")):
        name = path.stem
        state = read_state(name, root) or {}
        if state.get("state") not in RUNNING:
            continue
        (root / f"{name}.stop").touch()
        if state.get("state") == "queued" and state.get("jobid"):
            subprocess.run(["scancel", str(state["jobid"])], capture_output=True)
        asked.append(name)
    deadline = time.monotonic() + wait_s
    while asked and time.monotonic() < deadline:
        states = [(read_state(n, root) or {}).get("state") for n in asked]
        if all(s not in RUNNING or s == "queued" for s in states):
            break
        time.sleep(0.25)
    return asked


# --- the supervisor -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _live_leases(name: str, root: Path) -> int:
    folder = Path(root) / f"{name}.leases"
    now = time.time()
    live = 0
    for path in folder.glob("*") if folder.exists() else ():
        try:
            if now - path.stat().st_mtime < LEASE_STALE_S:
                live += 1
            else:
                path.unlink(missing_ok=True)  # a job that died without releasing it
        except OSError:
            continue
    return live


def _stop_process(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``timeout``; returns once nothing
    of the group runs (a command that stops what it started on SIGTERM has done so)."""

    def group_alive() -> bool:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.poll()
        if process.returncode is not None and not group_alive():
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def supervise(name: str, spec: dict[str, Any], root: Path, logs: Path) -> int:
    """Run the server and watch it (see the module doc); the exit status of this process."""
    root, logs = Path(root), Path(logs)
    started = time.time()
    port = _free_port()
    command = spec["serve"].replace("{port}", str(port))
    state: dict[str, Any] = {
        "name": name,
        "state": "starting",
        "host": socket.gethostname(),
        "port": port,
        "pid": os.getpid(),
        "jobid": os.environ.get("SLURM_JOB_ID"),
        "command": command,
        "log": str(log_path(name, logs)),
        "started": started,
        "beat": started,
        "reason": None,
    }

    def publish(**changes: Any) -> None:
        state.update(changes, beat=time.time())
        _write(state_path(name, root), state)

    stop_file = root / f"{name}.stop"
    stop_file.unlink(missing_ok=True)
    print(f"endpoint {name}: {command}", flush=True)
    process = subprocess.Popen(
        ["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, start_new_session=True
    )
    publish(server_pgid=process.pid)  # its own session: stopping it stops what it started
    signalled: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        signalled.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def finish(what: str, reason: str, code: int) -> int:
        publish(state="stopping", reason=reason)
        _stop_process(process)
        publish(state=what, reason=reason, stopped=time.time())
        print(f"endpoint {name}: {what} ({reason})", flush=True)
        return code

    local = f"http://127.0.0.1:{port}/v1"
    ready_by = started + float(spec.get("ready_timeout_s", 600))
    end_by = started + 60.0 * float(spec.get("time_limit_min", 720))
    idle_s = float(spec.get("idle_timeout_s", 300))
    while not answers(local, timeout=2.0):
        if process.poll() is not None:
            _stop_process(process, timeout=5.0)  # what it left behind in its process group
            publish(state="died", reason=f"exited with status {process.returncode} while starting")
            return 1
        if signalled:
            return finish("stopped", "signal while starting", 1)
        if time.time() > ready_by or stop_file.exists():
            why = "stop requested" if stop_file.exists() else "not ready within ready_timeout_s"
            return finish("failed", why, 1)
        time.sleep(0.25)
    publish(state="ready", base_url=f"http://{state['host']}:{port}/v1", ready=time.time())
    print(f"endpoint {name}: ready on port {port}", flush=True)
    last_used = time.time()
    while True:
        time.sleep(0.5)
        now = time.time()
        if process.poll() is not None:
            _stop_process(process, timeout=5.0)  # what it left behind in its process group
            publish(state="died", reason=f"the server exited with status {process.returncode}")
            print(f"endpoint {name}: died (status {process.returncode})", flush=True)
            return 1
        if signalled:
            return finish("stopped", "signal", 0)
        if stop_file.exists():
            stop_file.unlink(missing_ok=True)
            return finish("stopped", "the workflow ended", 0)
        if now > end_by:
            return finish("stopped", "time limit", 0)
        if _live_leases(name, root):
            last_used = now
        elif now - last_used > idle_s:
            publish(state="stopping", reason="idle")
            if _live_leases(name, root):  # a job took a lease meanwhile: keep serving
                publish(state="ready", reason=None)
                last_used = now
            else:
                return finish("stopped", f"idle for {idle_s:.0f}s", 0)
        if now - state["beat"] >= BEAT_S:
            publish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mnemoflow.ops.endpoints")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("supervise", help="run and watch one managed endpoint")
    run.add_argument("name")
    run.add_argument("--spec", required=True, help="the endpoint's config entry as JSON")
    run.add_argument("--root", default=str(STATE_DIR))
    run.add_argument("--logs", default=str(LOG_DIR))
    args = parser.parse_args(argv)
    return supervise(args.name, json.loads(args.spec), Path(args.root), Path(args.logs))


if __name__ == "__main__":
    sys.exit(main())
