"""``mnemoflow plan [snakemake args]``: calls, tokens, dollars and hours of a run, before it runs.

The arguments are those of ``mnemoflow run`` (``--configfile F``, ``--directory D``, targets,
``--forceall`` ...): a Snakemake dry run on them lists the jobs that would run and hands back the
config it parsed (:data:`~mnemoflow.planning.budget.DUMP_ENV`); the planner then walks those jobs
without calling any model (docs/plan.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.commands.run import ROOT
from mnemoflow.config_schema import check_config_files
from mnemoflow.planning.budget import DUMP_ENV
from mnemoflow.planning.run import Job, plan_run

_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
_ERROR = re.compile(r"^\w*(Error|Exception) in (file|rule|line)\b")


@COMMANDS.register(
    "plan",
    help="model calls, tokens, dollars and hours of a run before it starts "
    "(extra arguments go to snakemake, as for run)",
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="the plan as one JSON object")
    parser.set_defaults(func=run)


def dry_run_jobs(output: str) -> list[Job]:
    """(rule, wildcards) of every job a ``snakemake -n`` log lists."""
    jobs: list[Job] = []
    for line in output.splitlines():
        rule = _RULE.match(line)
        if rule:
            jobs.append((rule.group(1), {}))
            continue
        wildcards = _WILDCARDS.match(line)
        if wildcards and jobs:
            pairs = (part.split("=", 1) for part in wildcards.group(1).split(", "))
            jobs[-1] = (jobs[-1][0], {k: v for k, v in pairs})
    return jobs


def dry_run_error(output: str) -> str:
    """The one line a failed dry run says was wrong (the line after Snakemake's ``XError in
    file ...``), else its last line; a message that ends in a list (Snakemake's "Missing input
    files for rule X:") has the list's "affected files" joined onto it, never cut off."""
    lines = [line for line in output.splitlines() if line.strip()] or ["no output"]
    for index, (line, after) in enumerate(zip(lines, lines[1:], strict=False)):
        if _ERROR.match(line):
            listed = _listed(lines[index + 2 :]) if after.rstrip().endswith(":") else ""
            return after.strip() + listed
    return lines[-1].strip()


def _listed(lines: list[str]) -> str:
    """`` a, b`` from the indented block after a message ending in ":" (its "affected files:"
    part when there is one)."""
    block = []
    for line in lines:
        if not line.startswith((" ", "\t")):
            break
        block.append(line.strip())
    if "affected files:" in block:
        block = block[block.index("affected files:") + 1 :]
    return " " + ", ".join(block) if block else ""


def run(args: argparse.Namespace) -> int:
    if not (ROOT / "Snakefile").exists():
        raise OSError(f"{ROOT}: no Snakefile; run mnemoflow from a checkout of the repository")
    check_config_files(list(getattr(args, "extra", [])), ROOT)  # file and line of a YAML error
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "config.json"
        command = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-n"]
        result = subprocess.run(
            [*command, *getattr(args, "extra", [])],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, DUMP_ENV: str(dump)},
        )
        if result.returncode != 0 or not dump.is_file():
            raise OSError(f"the dry run failed: {dry_run_error(result.stdout + result.stderr)}")
        parsed = json.loads(dump.read_text(encoding="utf-8"))
    jobs = dry_run_jobs(result.stdout + result.stderr)
    with contextlib.chdir(parsed["workdir"]):  # the config's relative paths, as the run reads them
        plan = plan_run(parsed["config"], parsed["workdir"], jobs, parsed["model_rules"])
    sys.stdout.write(plan.to_json() if args.json else plan.render())
    return 0
