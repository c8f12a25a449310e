"""``mnemoflow cache compact DIR``: merge the response cache's shards once no job writes it.

A run of thousands of jobs leaves thousands of shard pairs, read by every later job at start;
compaction merges them into one, serving every entry the same reply (docs/gateway.md, "Cache and
ledger"; :mod:`mnemoflow.llm.cache_compact`). It refuses, in one line, while a job may still write.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.llm.cache_compact import MIN_AGE_S, compact


@COMMANDS.register("cache", help="maintain the response cache")
def register(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    merge = actions.add_parser(
        "compact", help="merge the cache's shard pairs into one (when no job writes it)"
    )
    merge.add_argument("directory", type=Path, help="the cache (config `cache:`)")
    merge.add_argument(
        "--min-age",
        type=float,
        default=MIN_AGE_S,
        help=f"seconds a shard must be unchanged to count as finished (default {MIN_AGE_S:g}); "
        "jobs on other nodes are seen only this way",
    )
    merge.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(compact(args.directory, args.min_age).line())
    return 0
