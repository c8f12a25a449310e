"""``mnemoflow verify [RESULTS]``: every output that is not what its job wrote, in one line each.

A file a ledger lists must have the size and sha256 the ledger recorded (a table changed with its
modification time kept is found too); every other table and ledger must read (Parquet footer and
schema, JSON). ``--quarantine`` moves the bad ones to ``RESULTS/quarantine/`` so the next run
makes them again (docs/reliability.md, "Corrupt outputs"). Exit status 1 when any is bad.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.data.integrity import quarantine, verify


@COMMANDS.register("verify", help="check a run's outputs against their ledgers and formats")
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", nargs="?", type=Path, default=Path("results"), help="default: results"
    )
    moves = "move the bad files to RESULTS/quarantine/ (the next run makes them again)"
    parser.add_argument("--quarantine", action="store_true", help=moves)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problems, checked = verify(args.results)
    for problem in problems:
        line = problem.line()
        if args.quarantine and problem.path.exists():
            line += f": moved to {quarantine(problem.path, args.results)}"
        print(line)
    print(f"{checked} files checked, {len(problems)} bad")
    return 1 if problems else 0
