"""``mnemoflow generate``: the synthetic benchmark's unified tables, or (``generate amemgym``)
a procedural AMemGym environment as ``DIR/data.json``."""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.commands import COMMANDS
from mnemoflow.data import amemgym_procedural
from mnemoflow.data.synthetic import DEFAULTS, generate
from mnemoflow.data.tables import write_table

#: Options only the AMemGym generator reads (``--users``, ``--periods``, ``--seed`` are shared).
AMEMGYM_ONLY = ("questions", "start_date", "personas")


@COMMANDS.register(
    "generate", help="write the synthetic benchmark as Parquet, or an AMemGym data.json"
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "benchmark",
        nargs="?",
        default="synthetic",
        choices=("synthetic", "amemgym"),
        help="synthetic (default): unified tables; amemgym: DIR/data.json in the reference schema",
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    for key, default in DEFAULTS.items():
        kind = type(default)
        parser.add_argument(f"--{key.replace('_', '-')}", type=kind, default=None)
    parser.add_argument("--questions", type=int, default=None, help="amemgym: questions per user")
    parser.add_argument("--start-date", default=None, help="amemgym: YYYY-MM-DD of period 0")
    parser.add_argument("--personas", type=Path, default=None, help="amemgym: persona pool JSONL")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.benchmark == "amemgym":
        return run_amemgym(args)
    given = [f"--{key.replace('_', '-')}" for key in AMEMGYM_ONLY if getattr(args, key)]
    if given:
        raise ValueError(f"{given[0]} is an option of 'generate amemgym' only")
    params = {
        key: DEFAULTS[key] if getattr(args, key) is None else getattr(args, key) for key in DEFAULTS
    }
    sessions, questions = generate({"loader": "synthetic", "params": params})
    write_table(sessions, args.out / "sessions.parquet", "sessions")
    write_table(questions, args.out / "questions.parquet", "questions")
    print(f"{args.out}: {len(sessions)} turns, {len(questions)} questions")
    return 0


def run_amemgym(args: argparse.Namespace) -> int:
    names = ("users", "periods", "seed", "questions", "start_date")
    foreign = [
        f"--{key.replace('_', '-')}"
        for key in DEFAULTS
        if key not in names and getattr(args, key) is not None
    ]
    if foreign:
        raise ValueError(f"{foreign[0]} is not an option of 'generate amemgym'")
    params = {key: getattr(args, key) for key in names if getattr(args, key) is not None}
    personas = args.personas or amemgym_procedural.PERSONAS
    users = amemgym_procedural.generate(params, personas=personas)
    path = amemgym_procedural.write_data(users, args.out)
    periods = len(users[0]["periods"]) - 1
    print(f"{path}: {len(users)} users, {periods} update periods (+ period 0)")
    return 0
