"""``mnemoflow normalize``: MemoryBench's normalized summary of final per-item values.

    mnemoflow normalize --set KIND:NAME --configs DIR --stats FILE --scores FILE --out DIR

FILE is JSONL of ``{"dataset", "test_idx", "value"}`` (already final per-item values, bool ->
1/0). Writes ``scores.parquet`` (metric average / weighted_average / z_score with dataset "all",
then per-dataset mean / minmax / z) and prints the summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.data.memorybench import parse_set, registry, select
from mnemoflow.data.tables import MEMORYBENCH_NORMALIZED, write_table
from mnemoflow.data.validate import DataError
from mnemoflow.eval.memorybench.memorybench_rescore import keyed_records
from mnemoflow.eval.memorybench.normalize import format_summary, normalize_set


@COMMANDS.register(
    "normalize", help="MemoryBench normalized scores (min-max, z) of per-item values"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", required=True, help="domain:NAME or task:NAME")
    parser.add_argument("--configs", required=True, type=Path, help="configs/datasets folder")
    parser.add_argument(
        "--stats", required=True, type=Path, help="final_evaluate_summary_wo_details.json"
    )
    parser.add_argument(
        "--scores", required=True, type=Path, help='JSONL {"dataset", "test_idx", "value"}'
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="allow datasets of the set without values (the reference averages what is there)",
    )
    parser.set_defaults(func=run)


def _number(value, where: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    raise DataError(f"{where}: field 'value' must be a number or true/false, got {value!r}")


def run(args: argparse.Namespace) -> int:
    ((kind, name),) = parse_set(args.set).items()
    datasets = [d for d, _ in select({kind: name}, registry(args.configs))]
    values = keyed_records(args.scores, "value", datasets)
    values["value"] = [
        _number(v, f"{args.scores}: ({d}, {i})")
        for d, i, v in values[["dataset", "test_idx", "value"]].itertuples(index=False)
    ]
    result = normalize_set(values, args.set, args.configs, args.stats, partial=args.partial)
    write_table(result, args.out / "scores.parquet", MEMORYBENCH_NORMALIZED)
    print(format_summary(result))
    return 0
