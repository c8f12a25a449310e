"""The ``mnemoflow`` command: one sub-command per module in :mod:`mnemoflow.commands`.

Each command module registers its ``register(parser)`` in :data:`mnemoflow.commands.COMMANDS`
with the sub-parser's options (``help``, ...); the parser lists the commands by name.
"""

from __future__ import annotations

import argparse
import sys

from mnemoflow.commands import COMMANDS

#: Commands whose unknown arguments are snakemake's.
SNAKEMAKE_COMMANDS = ("run", "plan", "batch")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemoflow", description="Benchmark memory and continual learning in LLM assistants."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS.names():
        COMMANDS.get(name)(subparsers.add_parser(name, **COMMANDS.info(name)))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # `mnemoflow run`, `plan` and `batch` hand every argument they do not know to snakemake
    # (--configfile, -n, targets); every other command rejects them
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in SNAKEMAKE_COMMANDS:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError) as exc:  # our errors are one line for people, not tracebacks
        print(f"mnemoflow {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
