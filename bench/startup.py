"""Per-job start-up of a workflow run, and its share of the run: ``python -m bench.startup``.

Every job logs its start-up when its function is called (``job start-up 0.91 s``: seconds since
its process started, i.e. the interpreter, Snakemake's script preamble and the imports) and its
own time at the end (``job done in 2.40 s``; ``mnemoflow.jobs.context.run``). Given a finished
run's ``results/logs`` this sums them per rule (a log file's name is its rule's: ``answer.log``,
``dialogues.log`` for the live and the replayed dialogues alike, ...):

    python -m bench.startup --logs results/logs --wall 790 [--cores 2]

The start-up share is sum(start-up) / (cores x wall): the part of the run's core time that jobs
spend starting. ``--wall`` defaults to the ``Elapsed time`` of the newest ``.snakemake/log``.

``--probe`` measures instead what a no-op job of every script costs, without running the
workflow: a fresh interpreter that imports ``snakemake.script`` (what the preamble unpickles) and
the script's own ``from mnemoflow.jobs import ...`` line, median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STARTUP = re.compile(r"job start-up ([0-9.]+) s")
DONE = re.compile(r"job done in ([0-9.]+) s")
ELAPSED = re.compile(r"Elapsed time: (?:(\d+) days?, )?(\d+):(\d+):([0-9.]+)")


def read_logs(logs: Path) -> dict[str, dict[str, list[float]]]:
    """rule -> {"startup": [...], "own": [...]} over every job log under ``logs``."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"startup": [], "own": []})
    for path in sorted(logs.rglob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        started, done = STARTUP.search(text), DONE.search(text)
        if started:
            out[path.stem]["startup"].append(float(started.group(1)))
        if done:
            out[path.stem]["own"].append(float(done.group(1)))
    return dict(out)


def newest_wall(workdir: Path) -> float | None:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    for log in reversed(logs):
        found = ELAPSED.search(log.read_text(encoding="utf-8", errors="replace"))
        if found:
            days, h, m, s = found.groups()
            return int(days or 0) * 86400 + int(h) * 3600 + int(m) * 60 + float(s)
    return None


def report(logs: Path, wall: float | None, cores: int) -> str:
    per_rule = read_logs(logs)
    lines = [
        "| rule | jobs | start-up median (s) | start-up sum (s) | own time sum (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    total_startup = total_own = 0.0
    jobs = 0
    for rule, times in sorted(per_rule.items(), key=lambda kv: -sum(kv[1]["startup"])):
        startup, own = times["startup"], times["own"]
        if not startup:
            continue
        jobs += len(startup)
        total_startup += sum(startup)
        total_own += sum(own)
        lines.append(
            f"| {rule} | {len(startup)} | {statistics.median(startup):.2f} | {sum(startup):.0f} "
            f"| {sum(own):.0f} |"
        )
    lines.append(f"| all | {jobs} | | {total_startup:.0f} | {total_own:.0f} |")
    lines.append("")
    lines.append(
        f"start-up / (start-up + own time) of the jobs: "
        f"{total_startup / max(total_startup + total_own, 1e-9):.1%}"
    )
    if wall:
        lines.append(
            f"start-up share of the run: {total_startup:.0f} s / ({cores} cores x {wall:.0f} s) "
            f"= {total_startup / (cores * wall):.1%}"
        )
    return "\n".join(lines)


def script_imports(script: Path) -> str:
    """The script's import lines (every script is ``from mnemoflow.jobs import run, X``)."""
    return "; ".join(
        line.strip()
        for line in script.read_text(encoding="utf-8").splitlines()
        if line.startswith(("from ", "import "))
    )


def probe(repeat: int) -> str:
    lines = ["| script | no-op job start-up, median (s) |", "|---|---:|"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rows = []
    for script in sorted((REPO / "scripts").glob("*.py")):
        code = "import pickle, snakemake.script; " + script_imports(script)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            times.append(time.perf_counter() - started)
        rows.append((script.stem, statistics.median(times)))
    bare = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pickle, snakemake.script"], check=True)
        bare.append(time.perf_counter() - started)
    for name, seconds in rows:
        lines.append(f"| {name} | {seconds:.2f} |")
    lines.append(f"| (interpreter + snakemake.script only) | {statistics.median(bare):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--logs", type=Path, default=Path("results/logs"))
    parser.add_argument("--wall", type=float, default=None, help="the run's wall-clock seconds")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--probe", action="store_true", help="no-op job per script instead")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.probe:
        print(probe(args.repeat))
        return 0
    wall = args.wall or newest_wall(args.logs.parent.parent)
    print(report(args.logs, wall, args.cores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
