"""``mnemoflow reparse``: re-read a run's stored judge replies with the current verdict readers.

    mnemoflow reparse RESULTS [--out DIR]

RESULTS is a results folder (every ``*judgements.parquet`` under it) or one judgements file. No
model is called. Prints every judgement whose verdict changes (old -> new) and a count per file;
with ``--out`` writes the re-read tables there, at the same paths relative to RESULTS, so a parser
fix can be audited on an old run (:mod:`mnemoflow.eval.static_qa.reparse`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.data.tables import read_table, write_table
from mnemoflow.eval.static_qa.reparse import reparse


@COMMANDS.register(
    "reparse", help="re-read a run's stored judge replies with the current parser; list changes"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="results folder or a judgements.parquet")
    parser.add_argument("--out", type=Path, help="write the re-read tables here")
    parser.set_defaults(func=run)


def judgement_files(results: Path, out: Path | None = None) -> list[Path]:
    """Every judgements table under ``results`` (not under ``out``), in a stable order."""
    if results.is_file():
        return [results]
    if not results.is_dir():
        raise FileNotFoundError(f"reparse: {results} is neither a results folder nor a file")
    skip = out.resolve() if out is not None else None
    found = sorted(
        path
        for path in results.rglob("*judgements.parquet")
        if skip is None or not path.resolve().is_relative_to(skip)
    )
    if not found:
        raise FileNotFoundError(f"reparse: no judgements.parquet under {results}")
    return found


def run(args: argparse.Namespace) -> int:
    root = args.results if args.results.is_dir() else args.results.parent
    total = changed = 0
    for path in judgement_files(args.results, args.out):
        table, changes = reparse(read_table(path, "judgements"))
        shown = path.relative_to(root)
        total, changed = total + len(table), changed + len(changes)
        print(f"{shown}: {len(table)} judgements, {len(changes)} changed")
        for change in changes:
            print(f"  {change.line()}")
        if args.out is not None:
            write_table(table, args.out / shown, "judgements")
    written = f"; re-read tables in {args.out}" if args.out is not None else ""
    print(f"{changed} of {total} judgements change with the current parser{written}")
    return 0
