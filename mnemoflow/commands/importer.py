"""``mnemoflow import``: a published per-question output as a system of the run, re-judged.

    mnemoflow import --format longmemeval|locomo|memorybench FILE --name NAME --benchmark BENCH
                     --out LAYER.yaml [--with SYSTEM ...] [--key KEY] [--retrievals FILE]

Writes a config layer (given after the run's own ``--configfile``s) with the system ``NAME``,
``{type: imported, format, path, sha256}``, whose answer job reads ``FILE`` instead of asking the
agent, and ``benchmarks.BENCH.systems: [SYSTEM ..., NAME]``, so the next run judges the published
answers with the configured judge beside the ``--with`` systems. The file's formats and how its
questions are matched: :mod:`mnemoflow.eval.imported`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mnemoflow.commands import COMMANDS
from mnemoflow.data.tables import write_atomic_text
from mnemoflow.eval.export import FORMATS
from mnemoflow.eval.imported import check_output, file_verdicts, system_entry


@COMMANDS.register(
    "import", help="turn a published per-question output into a system the run re-judges"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the published per-question output")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--name", required=True, help="the system's name in the run")
    parser.add_argument("--benchmark", required=True, help="the config's benchmark it answers")
    parser.add_argument("--out", required=True, type=Path, help="the config layer to write")
    parser.add_argument(
        "--with",
        dest="others",
        action="append",
        default=[],
        metavar="SYSTEM",
        help="a system of the config run beside it on the benchmark (repeatable)",
    )
    parser.add_argument("--key", help="locomo samples: which '<key>_prediction' to read")
    parser.add_argument(
        "--retrievals", type=Path, help="longmemeval: the retrieval log read as the ranking"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise FileNotFoundError(f"no such file {args.file}")
    count = check_output(args.format, args.file, args.key)
    entry = system_entry(args.format, args.file, args.key, args.retrievals)
    systems = [s for s in args.others if s != args.name] + [args.name]
    layer = {
        "systems": {args.name: entry},
        "benchmarks": {args.benchmark: {"systems": systems}},
    }
    header = (
        f"# mnemoflow import: {count} {args.format} answers of {args.file} as system "
        f"{args.name!r} on {args.benchmark!r}, judged by the run's judge\n"
    )
    verdicts = file_verdicts(args.format, args.file)
    if verdicts:  # the published judge's own number, to hold beside the re-judged one
        mean = sum(verdicts) / len(verdicts)
        published = f"the file's own judge: {mean:.4f} over {len(verdicts)}"
        header += f"# {published}\n"
    write_atomic_text(args.out, header + yaml.safe_dump(layer, sort_keys=False))
    print(f"{args.name}: {count} answers of {args.file} -> {args.out}")
    if verdicts:
        print(f"  {published} answers")
    return 0
