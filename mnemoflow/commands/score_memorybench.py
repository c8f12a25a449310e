"""``mnemoflow score --benchmark memorybench``: score stored predictions of a MemoryBench set.

    mnemoflow score --benchmark memorybench --data PATH --configs DIR --set KIND:NAME
                    --predictions FILE --out DIR [--stats FILE] [--config FILE]
                    [--bertscore-model FAMILY=FOLDER ...] [--scoring paper|judge]

PATH is what the loader reads (the Hub release folder, or a raw file); FILE is JSONL of
``{"dataset", "test_idx", "response"}``. Writes ``question_scores.parquet`` (dataset, test_idx,
metric, value, question_id, parse_ok, raw_reply, primary, prompt_version: one row per metric of an
item, ``primary`` marking the one normalization uses), ``scores.parquet`` (per-dataset means of
every metric and, for a domain / task set, the normalized summary), ``judge.json`` (the judge and
critic bindings, and per judge family its prompt version and whether the binding matches the
reference's sampling), ``fusion.json`` (the fused scores of JuDGE / IdeaBench / JRE-L, asked
once: a second run into the same ``--out`` reads them and makes no fusion call) and
``ledger.json``; prints the primary means. Judged metrics use the ``judge`` / ``critic`` roles of
``--config`` (YAML ``models``), else the offline heuristic judges. BERTScore (JuDGE, IdeaBench,
JRE-L) uses the bundled MiniLM unless ``--bertscore-model FAMILY=FOLDER`` points at a local copy
of the reference's model (scored at the reference's layer); ``judge.json`` records which.
``--scoring judge`` scores with MemoryBench's current LLM-judge protocol instead
(:mod:`mnemoflow.eval.memorybench.memorybench_judge_protocol`; ``--stats`` then defaults to the
shipped 0-1 statistics, and ``judge.json`` holds the protocol's provenance).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pandas as pd

from mnemoflow.data.memorybench import parse_set
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import (
    MEMORYBENCH_ITEM_SCORES,
    MEMORYBENCH_NORMALIZED,
    write_atomic_text,
    write_table,
)
from mnemoflow.errors import ConfigError
from mnemoflow.eval.benchmark_metric import metric_for
from mnemoflow.eval.memorybench import memorybench_judge_protocol
from mnemoflow.eval.memorybench.fusion import FusionStore
from mnemoflow.eval.memorybench.memorybench_judges import (
    PROTOCOL_JUDGES,
    families_of,
    judge_provenance,
)
from mnemoflow.eval.memorybench.memorybench_rescore import (
    dataset_means,
    primary_values,
    read_predictions,
    score_predictions,
)
from mnemoflow.eval.memorybench.normalize import (
    format_summary,
    missing_datasets,
    normalize_set,
)
from mnemoflow.eval.metrics.bertscore import REFERENCE_MODELS, BertScoreModel
from mnemoflow.llm.gateway import Gateway

STATS_NAME = "final_evaluate_summary_wo_details.json"
FUSION_FILE = "fusion.json"


def default_stats(configs: Path) -> Path:
    """The official layout: configs/datasets (registry) beside configs/<statistics file>."""
    return configs.parent / STATS_NAME


def bertscore_models(specs: list[str]) -> dict[str, BertScoreModel]:
    """``FAMILY=FOLDER`` options -> {family: the folder at the reference's layer for it}; every
    family not named uses the bundled MiniLM."""
    out = {family: BertScoreModel() for family in REFERENCE_MODELS}
    for spec in specs:
        family, sep, folder = spec.partition("=")
        if not sep or family not in REFERENCE_MODELS or not folder:
            raise ConfigError(
                f"--bertscore-model {spec!r}: expected FAMILY=FOLDER with FAMILY one of "
                f"{sorted(REFERENCE_MODELS)}"
            )
        out[family] = BertScoreModel(model=folder, num_layers=REFERENCE_MODELS[family][1])
    return out


def run(args: argparse.Namespace, models: dict) -> int:
    for option in ("configs", "set"):
        if getattr(args, option) is None:
            raise ConfigError(f"score --benchmark memorybench: --{option} is required")
    selection = parse_set(args.set)
    bertscore = bertscore_models(getattr(args, "bertscore_model", None) or [])
    ((kind, name),) = selection.items()
    spec = {
        "loader": "memorybench",
        "source": {"path": str(args.data)},
        "set": args.set,
        "configs": str(args.configs),
    }
    scoring = getattr(args, "scoring", None) or "paper"
    metrics = metric_for({**spec, "scoring": scoring}).item_metrics()
    questions = load_benchmark(spec).questions
    datasets = list(dict.fromkeys(questions["dataset"]))
    metrics.check_supported(datasets)
    joined = read_predictions(
        args.predictions, questions, datasets, name if kind == "dataset" else None
    )
    args.out.mkdir(parents=True, exist_ok=True)
    gateway = Gateway.from_config(models, cache_path=args.out / "llm_cache")
    try:
        fusion = FusionStore(args.out / FUSION_FILE)  # read afresh: this run's stored calls
        scores = asyncio.run(_score(joined, gateway, fusion, bertscore, metrics))
        table = dataset_means(scores, args.set, metrics)
        normalized, note = None, ""
        if kind != "dataset":
            stats = memorybench_judge_protocol.statistics_file(
                args.stats, scoring, default_stats(args.configs)
            )
            values = primary_values(scores)
            normalized = normalize_set(values, args.set, args.configs, stats, partial=True)
            missing = missing_datasets(values, args.set, args.configs)
            if missing:
                note = f"normalized over the datasets scored; missing: {', '.join(missing)}"
            table = pd.concat([normalized, table], ignore_index=True)
        write_table(scores, args.out / "question_scores.parquet", MEMORYBENCH_ITEM_SCORES)
        write_table(table, args.out / "scores.parquet", MEMORYBENCH_NORMALIZED)
        if scoring == "judge":
            judge = memorybench_judge_protocol.provenance(gateway)
        else:
            judge = judge_record(gateway, datasets)
        judge["bertscore"] = {
            family: model.describe()
            for family, model in bertscore.items()
            if any(d.startswith(family) for d in datasets)
        }
        write_atomic_text(args.out / "judge.json", json.dumps(judge, indent=2) + "\n")
        write_atomic_text(args.out / "ledger.json", gateway.ledger.to_json() + "\n")
    finally:
        gateway.close()
    failures = int((~scores["parse_ok"]).sum())
    print(f"memorybench {args.set}: scored {len(scores)} predictions -> {args.out}")
    means = table[table["dataset"] != "all"]
    primaries = set(scores[scores["primary"]]["metric"])
    for row in means[means["metric"].isin(primaries)].to_dict("records"):
        print(f"  {row['dataset']:<28} {row['metric']:<9} {row['value']:.4f}  (n={row['n']})")
    if failures:
        print(f"  judge replies never parsed: {failures} (scored as failures, see parse_ok)")
        scored = means[means["metric"].str.endswith(":scored")]
        for row in scored.to_dict("records"):
            metric = row["metric"].removesuffix(":scored")
            print(
                f"  {row['dataset']:<28} {metric:<9} {row['value']:.4f}  (n={row['n']}, "
                "over the judged items only)"
            )
    if normalized is not None:
        print(format_summary(normalized))
        if note:
            print(f"  {note}")
    return 0


def judge_record(gateway, datasets: list[str]) -> dict:
    """``judge.json``: the judge binding, the judge tasks of the protocols' metrics in use, and
    per judge family of the scored datasets its prompt version and binding (provenance)."""
    return {
        "judge": gateway.specs["judge"].public(),
        "tasks": [
            task
            for name, task in PROTOCOL_JUDGES.items()
            if any(d.startswith(name) for d in datasets)
        ],
        "families": judge_provenance(gateway, families_of(datasets)),
        "fusion_store": FUSION_FILE,
    }


async def _score(joined, gateway, fusion, bertscore, metrics=None):
    async with gateway:
        return await score_predictions(
            joined, gateway, fusion=fusion, bertscore=bertscore, metrics=metrics
        )
