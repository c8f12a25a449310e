"""``mnemoflow run``: run the Snakemake workflow of this checkout (a thin wrapper)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the workflow (extra arguments go to snakemake)", add_help=False
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    extra = sys.argv[sys.argv.index("run") + 1 :] if "run" in sys.argv else []
    if not (ROOT / "Snakefile").exists():
        raise OSError(f"{ROOT}: no Snakefile; run mnemoflow from a checkout of the repository")
    command = [sys.executable, "-m", "snakemake", "--cores", "all", *extra]
    return subprocess.call(command, cwd=ROOT)
