"""The ``mnemoflow`` command: one sub-command per module in :mod:`mnemoflow.commands`.

Each command module defines ``register(subparsers)`` (adds its parser, sets ``func``); adding a
command means adding one module and one line to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = [
    "mnemoflow.commands.run",
    "mnemoflow.commands.generate",
    "mnemoflow.commands.report",
    "mnemoflow.commands.data",
    "mnemoflow.commands.score",
    "mnemoflow.commands.normalize",
    "mnemoflow.commands.cluster",
    "mnemoflow.commands.serve",
    "mnemoflow.commands.metric",
    "mnemoflow.commands.cache",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemoflow", description="Benchmark memory and continual learning in LLM assistants."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # `mnemoflow run` hands every argument it does not know to snakemake (--configfile, -n,
    # targets); every other command rejects them
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError) as exc:  # our errors are one line for people, not tracebacks
        print(f"mnemoflow {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
