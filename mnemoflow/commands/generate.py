"""``mnemoflow generate``: write the synthetic benchmark's unified tables to a folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemoflow.data.synthetic import DEFAULTS, generate
from mnemoflow.data.tables import write_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("generate", help="write the synthetic benchmark as Parquet")
    parser.add_argument("--out", type=Path, required=True, help="folder for the two tables")
    for key, default in DEFAULTS.items():
        kind = type(default)
        parser.add_argument(f"--{key.replace('_', '-')}", type=kind, default=default)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    params = {key: getattr(args, key) for key in DEFAULTS}
    sessions, questions = generate({"loader": "synthetic", "params": params})
    write_table(sessions, args.out / "sessions.parquet", "sessions")
    write_table(questions, args.out / "questions.parquet", "questions")
    print(f"{args.out}: {len(sessions)} turns, {len(questions)} questions")
    return 0
