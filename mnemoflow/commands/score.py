"""``mnemoflow score``: re-score stored answers (LongMemEval-shaped files) without generation.

    mnemoflow score --benchmark longmemeval --data PATH --predictions FILE --out DIR
                    [--retrievals FILE] [--config FILE] [--repeats N]
    mnemoflow score --benchmark locomo --data locomo10.json --predictions SAMPLES.json --out DIR
                    [--prediction-key KEY]
    mnemoflow score --benchmark amemgym --data data.json (--replies FILE | --eval-output FILE)
                    --out DIR [--upper-bound FILE] [--recall FILE] [--reference-upper-bound]

LoCoMo's samples JSON (the official script's format: ``<KEY>_prediction`` beside each question
of ``qa``, optionally ``<KEY>_prediction_context`` with ranked dia_ids, read as the retrieval
ranking) is recognised by its shape. AMemGym's ``--eval-output`` is the file ``mnemoflow export
--format amemgym`` writes (per user the reference's overall and utilization results), or the
reference's own eval-output folder of one agent (``<user id>/overall_results.json``).

AMemGym needs no judge: raw checkpoint replies (and the upper-bound and recall replies) are
parsed and scored by :mod:`mnemoflow.eval.amemgym.amemgym_score`, the same code as the workflow's
score job; it writes ``question_scores.parquet`` and ``scores.parquet``.

Writes ``judgements.parquet``, ``question_scores.parquet`` (per question, long form),
``scores.parquet`` (aggregates), ``judge.json`` (judge model, prompt version, temperature, seeds)
and ``ledger.json`` into DIR, then prints the summary table. The judge role is the offline
heuristic unless ``--config`` binds ``models.judge`` to an endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import yaml

from mnemoflow.commands import COMMANDS
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import write_atomic_text, write_table
from mnemoflow.errors import ConfigError
from mnemoflow.eval import imported_amemgym
from mnemoflow.eval.amemgym.amemgym_score import read_reply_file, score_replies, score_table
from mnemoflow.eval.export import is_locomo_samples, read_eval_output, read_locomo_samples
from mnemoflow.eval.static_qa.judges import judge_provenance
from mnemoflow.eval.static_qa.rescore import (
    BENCHMARKS,
    Ranking,
    answers_from_predictions,
    read_predictions,
    read_retrievals,
    score_tables,
    summarize,
    write_scored,
)
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.gateway import Gateway


@COMMANDS.register(
    "score",
    help="judge and score a predictions file (LongMemEval / LoCoMo / MemoryBench), "
    "or AMemGym replies",
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--benchmark", required=True, choices=(*BENCHMARKS, "memorybench", "amemgym")
    )
    parser.add_argument(
        "--data",
        required=True,
        type=Path,
        help="data file (memorybench: release folder or raw file)",
    )
    parser.add_argument(
        "--predictions",
        type=Path,
        help='JSONL question_id+hypothesis; memorybench: {"dataset", "test_idx", "response"} '
        "(not amemgym)",
    )
    parser.add_argument("--configs", type=Path, help="memorybench: the configs/datasets folder")
    parser.add_argument("--set", help="memorybench: dataset:NAME, domain:NAME or task:NAME")
    parser.add_argument(
        "--stats", type=Path, help="memorybench: statistics file (default: beside --configs)"
    )
    parser.add_argument(
        "--scoring",
        choices=("paper", "judge"),
        default="paper",
        help="memorybench: the paper's metrics (default) or the current upstream LLM-judge "
        "protocol (docs/memorybench.md 'Two scoring protocols')",
    )
    parser.add_argument(
        "--bertscore-model",
        action="append",
        default=[],
        metavar="FAMILY=FOLDER",
        help="memorybench: local copy of the reference's BERTScore model for JuDGE, IdeaBench or "
        "JRE-L (its reference layer); default the bundled MiniLM (not the paper's model)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--retrievals", type=Path, help="retrieval log (LongMemEval's shape)")
    parser.add_argument(
        "--config",
        type=Path,
        help="YAML with models.judge (default: the offline heuristic judge, no model)",
    )
    parser.add_argument("--repeats", type=int, default=None, help="judge repeats (judge.repeats)")
    parser.add_argument("--seed", type=int, default=0, help="first seed of judge repeats")
    parser.add_argument("--system", default="predictions", help="system name in the tables")
    parser.add_argument(
        "--prediction-key",
        help="locomo samples JSON: read <KEY>_prediction (default: the one such field there)",
    )
    parser.add_argument(
        "--official-turn-sessions",
        action="store_true",
        help="session metrics from turns count only evidence turns (official noans labelling)",
    )
    amemgym = parser.add_argument_group("amemgym (JSONL; period, question_index 0-based)")
    amemgym.add_argument("--replies", type=Path, help="user_id, period, question_index, reply")
    amemgym.add_argument(
        "--eval-output",
        type=Path,
        help="instead of --replies: an eval-output JSON (mnemoflow export --format amemgym), "
        "or the reference's eval-output folder of one agent (<user id>/overall_results.json); "
        "a file's utilization_results are the upper bound unless --upper-bound is given, its "
        "recall_results the recall probes unless --recall is given",
    )
    amemgym.add_argument(
        "--upper-bound", type=Path, help="user_id, question_index, option_index, reply"
    )
    amemgym.add_argument("--recall", type=Path, help="user_id, period, question_index, reply")
    amemgym.add_argument(
        "--reference-upper-bound",
        action="store_true",
        help="the reference's upper-bound lookup by state tuple over all questions of a user",
    )
    parser.set_defaults(func=run)


def run_amemgym(args: argparse.Namespace) -> int:
    """Score raw AMemGym replies against data.json; no model is called."""
    if args.replies is not None and args.eval_output is not None:
        raise ConfigError("--benchmark amemgym takes --replies or --eval-output, not both")
    if args.replies is None and args.eval_output is None:
        raise ConfigError("--benchmark amemgym needs --replies (or --eval-output)")
    users = read_environment(args.data)
    recall = None
    if args.eval_output is not None and args.eval_output.is_dir():  # the reference's folder
        output = imported_amemgym.checked_against(
            imported_amemgym.read_output(args.eval_output), users
        )
        # as the workflow asks them: a question the folder has no reply to is unscored
        replies, upper, recall = imported_amemgym.every_reply(output, users), None, output.recall
    elif args.eval_output is not None:
        replies, upper, recall = read_eval_output(args.eval_output)
    else:
        replies, upper = read_reply_file(args.replies, "replies"), None
    if args.upper_bound:
        upper = read_reply_file(args.upper_bound, "upper")
    if args.recall:
        recall = read_reply_file(args.recall, "recall")
    question_scores, scores = score_replies(
        users,
        replies,
        upper,
        recall,
        reference_upper_bound=args.reference_upper_bound,
    )
    write_table(question_scores, args.out / "question_scores.parquet", "amemgym_question_scores")
    write_table(scores, args.out / "scores.parquet", "amemgym_scores")
    print(f"amemgym: scored {len(question_scores)} replies of {len(users)} users -> {args.out}")
    print(score_table(scores))
    return 0


def _config(path: Path | None) -> tuple[dict, dict]:
    """(models mapping, judge settings) from a YAML config; both empty without one."""
    if path is None:
        return {}, {}
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    models = raw.get("models") or {}
    judge = raw.get("judge") or {}
    if not isinstance(models, dict) or not isinstance(judge, dict):
        raise ConfigError(f"{path}: 'models' and 'judge' must be mappings")
    # a judge bound by endpoint name is resolved as the workflow resolves it
    models = bind_endpoints(models, raw.get("endpoints"))
    return {"judge": models["judge"]} if "judge" in models else {}, judge


def run(args: argparse.Namespace) -> int:
    if getattr(args, "scoring", "paper") != "paper" and args.benchmark != "memorybench":
        raise ConfigError(f"--scoring {args.scoring}: MemoryBench's, not {args.benchmark}'s")
    if args.benchmark == "amemgym":
        return run_amemgym(args)
    if args.predictions is None:
        raise ConfigError(f"--benchmark {args.benchmark} needs --predictions")
    models, judge_settings = _config(args.config)
    if args.benchmark == "memorybench":
        from mnemoflow.commands.score_memorybench import run as run_memorybench

        return run_memorybench(args, models)
    repeats = args.repeats if args.repeats is not None else int(judge_settings.get("repeats", 1))
    if repeats < 1:
        raise ConfigError(f"judge repeats must be >= 1, got {repeats}")
    prepared = load_benchmark({"loader": args.benchmark, "source": {"path": str(args.data)}})
    questions, sessions = prepared.questions, prepared.sessions
    known = set(questions["question_id"])
    rankings = read_retrievals(args.retrievals, known) if args.retrievals else None
    if args.benchmark == "locomo" and is_locomo_samples(args.predictions):
        predictions, context = read_locomo_samples(args.predictions, known, args.prediction_key)
        if rankings is None and context:
            rankings = context
    else:
        predictions = read_predictions(args.predictions, known)
    answers = answers_from_predictions(
        args.benchmark, questions, predictions, rankings, system=args.system
    )
    cache = args.out / "llm_cache"
    args.out.mkdir(parents=True, exist_ok=True)
    gateway = Gateway.from_config(models, cache_path=cache)
    try:
        scored = asyncio.run(_score(gateway, args, questions, sessions, answers, rankings, repeats))
        provenance = judge_provenance(gateway, args.benchmark, repeats, args.seed)
        write_scored(scored, args.out, provenance)
        write_atomic_text(args.out / "ledger.json", gateway.ledger.to_json() + "\n")
    finally:
        gateway.close()
    print(
        f"{args.benchmark}: scored {len(predictions)} of {len(questions)} questions -> {args.out}"
    )
    print(summarize(scored))
    return 0


async def _score(gateway, args, questions, sessions, answers, rankings, repeats):
    async with gateway:
        return await score_tables(
            gateway,
            args.benchmark,
            questions,
            sessions,
            answers,
            Ranking(rankings, evidence_turns_only=args.official_turn_sessions),
            repeats=repeats,
            seed=args.seed,
        )
