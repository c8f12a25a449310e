"""``mnemoflow export``: a run's answers in the format each benchmark's official scorer reads.

    mnemoflow export --format longmemeval|locomo|memorybench|amemgym --out DIR
                     [--results DIR] [--data PATH] [--benchmark NAME ...]

One file per (benchmark, system, protocol, step) of every benchmark under ``--results``
(default ``results``) loaded by that format's loader (or only the ``--benchmark`` ones), named
``{benchmark}.{system}.{protocol}.step{k}`` + a suffix per format; the formats are described in
:mod:`mnemoflow.eval.export`. LoCoMo needs the samples JSON the run read (``--data``); AMemGym
reads the generated ``environment/data.json``, or ``--data`` for a run on a given file.
``mnemoflow score`` reads every export back (tests/test_export.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.eval.export import FORMATS, export


@COMMANDS.register(
    "export", help="write a run's answers in a benchmark's official format, to re-grade them"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument(
        "--results", type=Path, default=Path("results"), help="results folder (default results)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="locomo: the samples JSON (locomo10.json); amemgym: data.json of a run on a file",
    )
    parser.add_argument(
        "--benchmark",
        action="append",
        default=[],
        metavar="NAME",
        help="only this benchmark (repeatable; default every one of the format)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    written = export(
        args.results, args.format, args.out, data=args.data, benchmarks=args.benchmark or None
    )
    for item in written:
        print(f"{item.run.name}: {item.items} answers -> {item.path}")
        for extra in item.also:
            print(f"  and its retrievals -> {extra}")
        if item.note:
            print(f"  note: {item.note}")
    return 0
