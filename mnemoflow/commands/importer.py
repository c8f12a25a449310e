"""``mnemoflow import``: a published per-question output as a system of the run, re-judged.

    mnemoflow import --format longmemeval|locomo|memorybench|amemgym PATH --name NAME
                     --benchmark BENCH --out LAYER.yaml [--with SYSTEM ...] [--key KEY]
                     [--retrievals FILE] [--run RUN_ID]

Writes a config layer (given after the run's own ``--configfile``s) with the system ``NAME``,
``{type: imported, format, path, sha256}``, whose answer job (AMemGym: dialogues job) reads
``PATH`` instead of asking the agent, and ``benchmarks.BENCH.systems: [SYSTEM ..., NAME]``, so the
next run judges the published answers with the configured judge beside the ``--with`` systems.
``PATH`` is a file, or a folder: AMemGym's own eval-output of one agent (one folder per user), a
MemoryBench-Results copy (``--run`` picks the run whose ``predict.json`` is imported) or one of its
run folders. The formats and how records find their questions: :mod:`mnemoflow.eval.imported`,
:mod:`mnemoflow.eval.imported_amemgym`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mnemoflow.commands import COMMANDS
from mnemoflow.data.memorybench_results import run_predictions
from mnemoflow.data.tables import write_atomic_text
from mnemoflow.eval import imported_amemgym
from mnemoflow.eval.export import FORMATS
from mnemoflow.eval.imported import check_output, file_verdicts, system_entry


@COMMANDS.register(
    "import", help="turn a published per-question output into a system the run re-judges"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", type=Path, help="the published per-question output (file, or folder: see above)"
    )
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
    parser.add_argument("--run", help="memorybench results folder: the run id to import")
    parser.set_defaults(func=run)


def _resolved(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """(the file or folder the system reads, lines saying what the publisher's own numbers
    are): a MemoryBench-Results folder becomes its run's predict.json."""
    path = args.file
    if args.format == "memorybench" and path.is_dir():
        path, entry = run_predictions(path, args.run)
        numbers = ", ".join(f"{k}={v:.4g}" for k, v in entry["summary"].items())
        return path, [f"MemoryBench-Results run {entry['run_id']!r}: its summary {numbers}"]
    if args.format == "amemgym" and path.is_dir():
        lines = []
        published = imported_amemgym.published_accuracy(path)
        if published:
            mean, n = imported_amemgym.pooled(published)
            lines.append(f"the folder's own overall_metrics: accuracy {mean:.4f} over {n}")
        mean, n = imported_amemgym.pooled(imported_amemgym.strict_accuracy(path))
        lines.append(f"its replies re-parsed strictly: accuracy {mean:.4f} over {n}")
        return path, lines
    if not path.is_file():
        raise FileNotFoundError(f"no such file {path}")
    return path, []


def run(args: argparse.Namespace) -> int:
    if not args.file.exists():
        raise FileNotFoundError(f"no such file or folder {args.file}")
    args.file, notes = _resolved(args)
    count = check_output(args.format, args.file, args.key)
    entry = system_entry(args.format, args.file, args.key, args.retrievals)
    systems = [s for s in args.others if s != args.name] + [args.name]
    layer = {
        "systems": {args.name: entry},
        "benchmarks": {args.benchmark: {"systems": systems}},
    }
    how = "judged by the run's judge"
    if args.format == "amemgym":
        how = "scored against the benchmark's environment"
    header = (
        f"# mnemoflow import: {count} {args.format} answers of {args.file} as system "
        f"{args.name!r} on {args.benchmark!r}, {how}\n"
    )
    verdicts = file_verdicts(args.format, args.file)
    if verdicts:  # the published judge's own number, to hold beside the re-judged one
        mean = sum(verdicts) / len(verdicts)
        notes.append(f"the file's own judge: {mean:.4f} over {len(verdicts)} answers")
    header += "".join(f"# {note}\n" for note in notes)
    write_atomic_text(args.out, header + yaml.safe_dump(layer, sort_keys=False))
    print(f"{args.name}: {count} answers of {args.file} -> {args.out}")
    for note in notes:
        print(f"  {note}")
    return 0
