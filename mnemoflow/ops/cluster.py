"""A throwaway single-node SLURM cluster on this machine, to try and test the SLURM path.

``up`` starts munged, slurmctld and slurmd from Debian's ``slurm-wlm`` and ``munge`` packages with a
slurm.conf generated from ``hostname -s`` and ``slurmd -C``; ``down`` stops exactly the processes
``up`` started (by PID, checked against the process start time so a recycled PID is never hit).
Nothing is installed here: a missing program is one error line that names the apt-get command.

Why the config lives at ``/etc/slurm/slurm.conf`` and nowhere else: Snakemake's job-step plugin
drops ``SLURM_CONF`` before its nested ``srun``, so any other path makes every job fail with
"Could not establish a configuration source". A config already there that this module did not
write is moved aside on ``up`` and put back on ``down``.

Why ``MinJobAge=300`` and no accounting: without slurmdbd ``sacct`` cannot answer, so Snakemake
must poll with ``squeue`` (profile ``slurm-local``), which only sees jobs slurmctld still keeps.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path

from mnemoflow.ops.daemon import Daemon, is_running, log_tail, start, stop, write_json

SLURM_CONF = Path("/etc/slurm/slurm.conf")
SPOOL = Path("/var/spool/mnemoflow-slurm")
STATE_FILE = SPOOL / "cluster.json"
BACKUP_SUFFIX = ".mnemoflow-backup"
MARKER = "# written by `mnemoflow cluster up`; removed by `mnemoflow cluster down`"
PARTITION = "debug"
INSTALL_HINT = "apt-get install -y slurm-wlm munge"

#: Programs ``up`` runs and a workflow run needs; all come from Debian's slurm-wlm and munge.
PROGRAMS = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "sinfo", "sbatch", "squeue")
#: The hardware keys of ``slurmd -C`` that go onto the NodeName line.
NODE_KEYS = (
    "CPUs",
    "Boards",
    "SocketsPerBoard",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
)
#: Stop order: the node daemon first, authentication last.
DAEMONS = ("slurmd", "slurmctld", "munged")


class ClusterError(RuntimeError):
    """A one-line reason the local cluster cannot be started or stopped."""


def find_program(name: str) -> str | None:
    """Locate a program on PATH or in the sbin folders (not on a non-root user's PATH)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if find_program(name) is None]


def parse_slurmd_c(text: str) -> dict[str, str]:
    """The node line of ``slurmd -C`` as a mapping: ``{"NodeName": "vm", "CPUs": "2", ...}``."""
    for line in text.splitlines():
        if line.startswith("NodeName="):
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            missing = [key for key in NODE_KEYS if key not in fields]
            if missing:
                raise ClusterError(f"slurmd -C: node line lacks {missing}: {line!r}")
            return fields
    raise ClusterError(f"slurmd -C: no 'NodeName=' line in its output: {text.strip()!r}")


def render_slurm_conf(host: str, node: dict[str, str], spool: Path = SPOOL) -> str:
    """slurm.conf for one node that is both controller and compute node, with root as SlurmUser.

    ``RealMemory`` is what ``slurmd -C`` measured: declaring more makes slurmd drain the node.
    """
    hardware = " ".join(f"{key}={node[key]}" for key in NODE_KEYS)
    lines = [
        MARKER,
        "ClusterName=mnemoflow-local",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "ReturnToService=2",
        "MinJobAge=300",
        f"StateSaveLocation={spool}/state",
        f"SlurmdSpoolDir={spool}/spool",
        f"SlurmctldPidFile={spool}/slurmctld.pid",
        f"SlurmdPidFile={spool}/slurmd.pid",
        f"SlurmctldLogFile={spool}/slurmctld.log",
        f"SlurmdLogFile={spool}/slurmd.log",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        f"NodeName={host} {hardware} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def parse_sinfo_states(text: str) -> dict[str, str]:
    """``sinfo -h -N -o '%N %T'`` output -> {node: state}, e.g. ``{"vm": "idle"}``."""
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def _run(command: list[str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def read_state() -> dict:
    if not STATE_FILE.exists():
        return {"daemons": []}
    return json.loads(STATE_FILE.read_text())


def _write_state(state: dict) -> None:
    write_json(STATE_FILE, state)


def _daemons(state: dict) -> list[Daemon]:
    return [Daemon(**item) for item in state.get("daemons", [])]


def munge_works() -> bool:
    """True when a munged already answers (``munge -n | unmunge``), e.g. a system one."""
    try:
        token = _run([find_program("munge") or "munge", "-n"], timeout=5)
        if token.returncode != 0:
            return False
        check = subprocess.run(
            [find_program("unmunge") or "unmunge"],
            input=token.stdout,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return check.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def node_states() -> dict[str, str]:
    try:
        result = _run([find_program("sinfo") or "sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_sinfo_states(result.stdout) if result.returncode == 0 else {}


def up(timeout: float = 60.0) -> dict:
    """Start the cluster (or confirm it is up) and return the state: daemons, host, seconds.

    Waits until ``sinfo`` reports the node idle, at most ``timeout`` seconds; on failure stops
    whatever this call started and raises :class:`ClusterError` with the daemons' log tails.
    """
    if os.geteuid() != 0:
        raise ClusterError(
            "mnemoflow cluster up must run as root (it writes /etc/slurm, runs slurmd)"
        )
    missing = missing_programs()
    if missing:
        raise ClusterError(f"missing {', '.join(missing)}; install them with: {INSTALL_HINT}")
    state = read_state()
    running = [d for d in _daemons(state) if is_running(d)]
    if running and len(running) == len(state["daemons"]):
        return {**state, "already_running": True}
    if running:
        raise ClusterError(
            f"{STATE_FILE}: only {[d.name for d in running]} still run; "
            "run `mnemoflow cluster down` first"
        )
    started = time.monotonic()
    host = _run(["hostname", "-s"]).stdout.strip()
    if not host:
        raise ClusterError("hostname -s printed nothing; cannot name the node")
    probe = _run([find_program("slurmd") or "slurmd", "-C"])
    node = parse_slurmd_c(probe.stdout)
    for folder in (SPOOL / "state", SPOOL / "spool"):
        shutil.rmtree(folder, ignore_errors=True)  # a fresh cluster: no jobs from earlier runs
        folder.mkdir(parents=True)
    state = {"host": host, "daemons": [], "conf": str(SLURM_CONF), "backup": None}
    _write_state(state)
    daemons: list[Daemon] = []
    try:
        if not munge_works():
            run_dir = Path("/run/munge")
            run_dir.mkdir(parents=True, exist_ok=True)
            munge_user = pwd.getpwnam("munge")
            os.chown(run_dir, munge_user.pw_uid, munge_user.pw_gid)
            command = [find_program("munged"), "-F"]
            daemons.append(_start("munged", command, user="munge"))
            state["daemons"] = [d.to_dict() for d in daemons]
            _write_state(state)
            _wait(munge_works, 10, lambda: "munged does not answer `munge -n | unmunge`", daemons)
        state["backup"] = _install_conf(render_slurm_conf(host, node))
        _write_state(state)
        for name in ("slurmctld", "slurmd"):
            command = [find_program(name), "-D", "-f", str(SLURM_CONF)]
            daemons.append(_start(name, command))
            state["daemons"] = [d.to_dict() for d in daemons]
            _write_state(state)
        remaining = max(1.0, timeout - (time.monotonic() - started))
        _wait(
            lambda: node_states().get(host, "").rstrip("*~#") == "idle",
            remaining,
            lambda: f"node {host} not idle after {timeout:.0f}s (sinfo: {node_states() or '-'})",
            daemons,
        )
    except BaseException:
        down()
        raise
    state["seconds_to_idle"] = round(time.monotonic() - started, 2)
    _write_state(state)
    return state


def _start(name: str, command: list[str], user: str | None = None) -> Daemon:
    try:
        return start(name, command, SPOOL / f"{name}.out", user=user)
    except OSError as exc:
        raise ClusterError(str(exc)) from None


def _wait(ready, timeout: float, message, daemons: list[Daemon]) -> None:
    """Poll ``ready()`` until true; fail early when a daemon dies, else after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        dead = [d for d in daemons if not is_running(d)]
        if dead:
            logs = "; ".join(f"{d.name}: {log_tail(d.log)}" for d in dead)
            raise ClusterError(f"{', '.join(d.name for d in dead)} exited: {logs}")
        time.sleep(0.5)
    logs = "; ".join(f"{d.name}: {log_tail(d.log, 3)}" for d in daemons)
    raise ClusterError(f"{message()}; logs: {logs}")


def _install_conf(text: str) -> str | None:
    """Write slurm.conf atomically; move a config this module did not write aside first."""
    backup = None
    if SLURM_CONF.exists() and MARKER not in SLURM_CONF.read_text(errors="replace"):
        backup = str(SLURM_CONF) + BACKUP_SUFFIX
        if Path(backup).exists():
            raise ClusterError(f"{backup} exists already; restore or remove it first")
        SLURM_CONF.replace(backup)
    SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
    tmp = SLURM_CONF.with_suffix(".conf.tmp")
    tmp.write_text(text)
    tmp.replace(SLURM_CONF)
    return backup


def down(timeout: float = 15.0) -> list[str]:
    """Stop the daemons ``up`` started (SIGTERM, then SIGKILL after ``timeout``); names stopped."""
    state = read_state()
    stopped = []
    for daemon in sorted(_daemons(state), key=lambda d: DAEMONS.index(d.name)):
        if stop(daemon, timeout):
            stopped.append(daemon.name)
    if SLURM_CONF.exists() and MARKER in SLURM_CONF.read_text(errors="replace"):
        SLURM_CONF.unlink()
    if state.get("backup") and Path(state["backup"]).exists():
        Path(state["backup"]).replace(SLURM_CONF)
    STATE_FILE.unlink(missing_ok=True)
    return stopped


def status() -> dict:
    """What runs of what ``up`` started, and what sinfo says."""
    state = read_state()
    return {
        "daemons": {d.name: (d.pid if is_running(d) else None) for d in _daemons(state)},
        "nodes": node_states() if SLURM_CONF.exists() else {},
        "conf": str(SLURM_CONF) if SLURM_CONF.exists() else None,
    }
