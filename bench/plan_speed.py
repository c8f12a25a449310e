"""Time of ``mnemoflow plan`` on the LongMemEval-S preset, against a baseline commit, same run.

Writes a LongMemEval_S-shaped stand-in (``bench.longmemeval_stream.generate``: haystacks of 50
sessions of 10 turns of 120 words, drawn from a shared pool; the real file is not needed) and a
layer pointing both of the preset's benchmarks at it, exports the baseline commit (``--baseline``,
default ``main``) into a temporary folder, and runs ``mnemoflow plan --json`` with
``configs/paper/longmemeval-s.yaml configs/site.example.yaml LAYER`` in a fresh directory
(no results, no cache) with each checkout in turn, alternating, ``--runs`` times. Prints the
median wall and CPU seconds (the planner's process and its dry run) of each and their ratio, and
checks that both plans are identical (the planner's output must not change with its speed).

    python -m bench.plan_speed [--questions 500] [--runs 3] [--baseline main] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.longmemeval_stream import generate

ROOT = Path(__file__).resolve().parents[1]
PRESET = ("configs/paper/longmemeval-s.yaml", "configs/site.example.yaml")
#: bytes of one stand-in haystack of 50 sessions (as ``generate`` sizes its file)
HAYSTACK_BYTES = 50 * 10 * 120 * 7


def plan_once(tree: Path, layer: Path, workdir: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the plan and its children, the plan's JSON) of one plan with ``tree``."""
    workdir.mkdir(parents=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mnemoflow.cli", "plan", "--json", "--directory", str(workdir)]
        + ["--configfile", *(str(tree / p) for p in PRESET), str(layer)],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"plan with {tree} failed: {result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout


def export(ref: str, folder: Path) -> Path:
    """The tree of commit ``ref`` of this repository, written into ``folder``."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="the commit to compare with")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "longmemeval_s_standin.json"
        megabytes = (args.questions + 0.5) * HAYSTACK_BYTES / 1e6
        shape = generate(data, megabytes, sessions_per_haystack=50)
        source = {"download": False, "source": {"path": str(data)}}
        layer = tmp / "layer.yaml"
        names = ("longmemeval_s_long_context", "longmemeval_s")
        layer.write_text(yaml.safe_dump({"benchmarks": {n: source for n in names}}))
        trees = {"baseline": export(args.baseline, Path(tempfile.mkdtemp(dir=tmp))), "ours": ROOT}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        plans: dict[str, set[str]] = {name: set() for name in trees}
        for run in range(args.runs):
            for name, tree in trees.items():
                wall, cpu, plan = plan_once(tree, layer, tmp / f"{name}-{run}")
                times[name].append((wall, cpu))
                plans[name].add(plan)
                print(f"{name} run {run}: wall {wall:.1f} s, CPU {cpu:.1f} s", flush=True)
    medians = {
        name: {
            "wall_s": statistics.median(w for w, _ in runs),
            "cpu_s": statistics.median(c for _, c in runs),
        }
        for name, runs in times.items()
    }
    out = {
        "stand_in": shape,
        "baseline": args.baseline,
        "runs": args.runs,
        "medians": medians,
        "cpu_ratio": medians["ours"]["cpu_s"] / medians["baseline"]["cpu_s"],
        "wall_ratio": medians["ours"]["wall_s"] / medians["baseline"]["wall_s"],
        "identical": len(plans["ours"] | plans["baseline"]) == 1,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
