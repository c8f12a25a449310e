"""``mnemoflow score --benchmark memorybench``: score stored predictions of a MemoryBench set.

    mnemoflow score --benchmark memorybench --data PATH --configs DIR --set KIND:NAME
                    --predictions FILE --out DIR [--stats FILE] [--config FILE]

PATH is what the loader reads (the Hub release folder, or a raw file); FILE is JSONL of
``{"dataset", "test_idx", "response"}``. Writes ``question_scores.parquet`` (dataset, test_idx,
metric, value, question_id, parse_ok, raw_reply), ``scores.parquet`` (per-dataset means and, for a
domain / task set, the normalized summary), ``judge.json`` (the judge binding) and
``ledger.json``; prints the same. Judged metrics use the ``judge`` role of ``--config`` (YAML
``models.judge``), else the offline heuristic judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pandas as pd

from mnemoflow.data.memorybench import parse_set
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import write_atomic_text, write_table
from mnemoflow.errors import ConfigError
from mnemoflow.eval.dialsim_accuracy import TASK as DIALSIM_TASK
from mnemoflow.eval.memorybench_rescore import (
    ITEM_SCORES,
    dataset_means,
    read_predictions,
    score_predictions,
)
from mnemoflow.eval.nfcats_judge import TASK as NFCATS_TASK
from mnemoflow.eval.normalize import NORMALIZED, format_summary, missing_datasets, normalize_set
from mnemoflow.llm.gateway import Gateway

STATS_NAME = "final_evaluate_summary_wo_details.json"
JUDGE_TASKS = (DIALSIM_TASK, NFCATS_TASK)


def default_stats(configs: Path) -> Path:
    """The official layout: configs/datasets (registry) beside configs/<statistics file>."""
    return configs.parent / STATS_NAME


def run(args: argparse.Namespace, models: dict) -> int:
    for option in ("configs", "set"):
        if getattr(args, option) is None:
            raise ConfigError(f"score --benchmark memorybench: --{option} is required")
    selection = parse_set(args.set)
    ((kind, name),) = selection.items()
    spec = {
        "loader": "memorybench",
        "source": {"path": str(args.data)},
        "set": args.set,
        "configs": str(args.configs),
    }
    questions = load_benchmark(spec).questions
    datasets = list(dict.fromkeys(questions["dataset"]))
    joined = read_predictions(
        args.predictions, questions, datasets, name if kind == "dataset" else None
    )
    args.out.mkdir(parents=True, exist_ok=True)
    gateway = Gateway.from_config(models, cache_path=args.out / "llm_cache.sqlite")
    try:
        scores = asyncio.run(_score(joined, gateway))
        table = dataset_means(scores, args.set)
        normalized, note = None, ""
        if kind != "dataset":
            stats = args.stats or default_stats(args.configs)
            values = scores[["dataset", "test_idx", "value"]]
            normalized = normalize_set(values, args.set, args.configs, stats, partial=True)
            missing = missing_datasets(values, args.set, args.configs)
            if missing:
                note = f"normalized over the datasets scored; missing: {', '.join(missing)}"
            table = pd.concat([normalized, table], ignore_index=True)
        write_table(scores, args.out / "question_scores.parquet", ITEM_SCORES)
        write_table(table, args.out / "scores.parquet", NORMALIZED)
        judge = {"judge": gateway.specs["judge"].public(), "tasks": list(JUDGE_TASKS)}
        write_atomic_text(args.out / "judge.json", json.dumps(judge, indent=2) + "\n")
        write_atomic_text(args.out / "ledger.json", gateway.ledger.to_json() + "\n")
    finally:
        gateway.close()
    failures = int((~scores["parse_ok"]).sum())
    print(f"memorybench {args.set}: scored {len(scores)} predictions -> {args.out}")
    means = table[table["dataset"] != "all"]
    for row in means[means["metric"].isin(set(scores["metric"]))].to_dict("records"):
        print(f"  {row['dataset']:<28} {row['metric']:<9} {row['value']:.4f}  (n={row['n']})")
    if failures:
        print(f"  judge replies never parsed: {failures} (scored as failures, see parse_ok)")
    if normalized is not None:
        print(format_summary(normalized))
        if note:
            print(f"  {note}")
    return 0


async def _score(joined, gateway):
    try:
        return await score_predictions(joined, gateway)
    finally:
        await gateway.aclose()
