"""``mnemoflow metric``: one deterministic metric over a file of pairs, to check numbers by hand.

    mnemoflow metric NAME --pairs FILE [--out FILE]
    mnemoflow metric --list

FILE is JSONL ``{"prediction", "reference"}`` (plus the metric's own fields). Prints one value
per line in input order and the mean; ``--out`` writes JSONL ``{"value": ...}`` (``null`` where the
metric defers to a judge) in the same order.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.data.tables import write_atomic_text
from mnemoflow.data.validate import DataError, field, where
from mnemoflow.eval.metric_registry import DETERMINISTIC_METRICS, get_metric


@COMMANDS.register("metric", help="score prediction/reference pairs with a metric")
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="metric name (see --list)")
    parser.add_argument("--pairs", type=Path, help='JSONL {"prediction", "reference"} per line')
    parser.add_argument("--out", type=Path, help='write JSONL {"value": ...} per input line')
    parser.add_argument("--list", action="store_true", help="name the deterministic metrics")
    parser.set_defaults(func=run)


def read_pairs(
    path: Path,
    extra_fields: tuple[str, ...] = (),
    reference_kinds: tuple[type, ...] = (str, dict, list),
    check=None,
) -> list[dict]:
    """The JSONL pairs, every line checked (``check(record, loc)``: the metric's own fields)."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            loc = where(path.name, number)
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{loc}: not JSON ({exc.msg})") from None
            field(record, "prediction", str, loc)
            field(record, "reference", reference_kinds, loc)
            for name in extra_fields:
                field(record, name, (str, int, float, dict, list), loc)
            if check is not None:
                check(record, loc)
            records.append(record)
    if not records:
        raise DataError(f"{path.name}: no pairs")
    return records


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name in DETERMINISTIC_METRICS.names():
            print(f"{name}\t{get_metric(name).summary}")
        return 0
    if not args.name or not args.pairs:
        raise ValueError("give a metric NAME and --pairs FILE (or --list)")
    metric = get_metric(args.name)
    records = read_pairs(args.pairs, metric.extra_fields, metric.reference_kinds, metric.check)
    values = metric.score_all(records)
    for value in values:
        print("null" if value is None else f"{value:.6f}")
    scored = [v for v in values if v is not None]
    mean = sum(scored) / len(scored) if scored else float("nan")
    print(f"{args.name}: mean {mean:.6f} over {len(scored)} of {len(values)} pairs")
    if args.out:
        lines = "".join(json.dumps({"value": v}) + "\n" for v in values)
        write_atomic_text(args.out, lines)
    return 0
