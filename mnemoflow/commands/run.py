"""``mnemoflow run``: run the Snakemake workflow of this checkout (a thin wrapper)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.config_schema import check_config_files

ROOT = Path(__file__).resolve().parents[2]


@COMMANDS.register("run", help="run the workflow (extra arguments go to snakemake)", add_help=False)
def register(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=run)


def snakemake_command(extra: list[str]) -> list[str]:
    """The snakemake call: all cores unless ``extra`` names ``--cores`` / ``-c`` itself."""
    given = any(a in ("--cores", "-c") or a.startswith(("--cores=", "-c")) for a in extra)
    return [sys.executable, "-m", "snakemake", *([] if given else ["--cores", "all"]), *extra]


def run(args: argparse.Namespace) -> int:
    if not (ROOT / "Snakefile").exists():
        raise OSError(f"{ROOT}: no Snakefile; run mnemoflow from a checkout of the repository")
    check_config_files(list(getattr(args, "extra", [])), ROOT)  # file and line of a YAML error
    return subprocess.call(snakemake_command(list(getattr(args, "extra", []))), cwd=ROOT)
