"""``mnemoflow report``: build the HTML report from a results folder (and optionally screenshot it).

The workflow's ``report`` rule builds the same page from exactly the files it declares; this
command is for a results folder at hand (copied from a cluster, say): it finds the tables by
their conventional names under ``--results``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mnemoflow.commands import COMMANDS
from mnemoflow.commands.compare import (
    add_published_arguments,
    published_comparison,
    read_preset,
    unpublished_preset,
)


@COMMANDS.register("report", help="build the HTML report from result tables")
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument(
        "--summary", type=Path, help="summary table (default: RESULTS/summary.parquet)"
    )
    parser.add_argument(
        "--judgements",
        default="**/judgements*.parquet",
        help="glob under RESULTS for per-question judgements (default: %(default)s)",
    )
    parser.add_argument(
        "--ledgers",
        default="**/*ledger*.json",
        help="glob under RESULTS for the gateway's ledgers (default: %(default)s)",
    )
    parser.add_argument(
        "--diagnosis", type=Path, help="diagnosis table (default: RESULTS/diagnosis.parquet if any)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="the config the results came from (YAML); its systems' published_as pair them",
    )
    parser.add_argument("--out", type=Path, help="the page (default: RESULTS/report.html)")
    parser.add_argument("--title", default="mnemoflow report")
    parser.add_argument(
        "--screenshot", type=Path, help="also render the page in headless Chromium to this PNG"
    )
    parser.add_argument(
        "--no-questions",
        action="store_true",
        help="leave out the per-question drill-down (report/questions.html)",
    )
    add_published_arguments(parser, config=False)  # the "Published vs ours" section
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mnemoflow.report.html import build_report
    from mnemoflow.report.screenshot import ScreenshotError, screenshot

    results = args.results
    summary = args.summary or results / "summary.parquet"
    if not summary.is_file():
        raise ValueError(f"{summary}: no summary table (run the workflow first, or pass --summary)")
    diagnosis = args.diagnosis
    if diagnosis is None and (results / "diagnosis.parquet").is_file():
        diagnosis = results / "diagnosis.parquet"
    config = {}
    if args.config is not None:
        try:
            config = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{args.config}: not valid YAML: {exc}") from exc
    out = args.out or results / "report.html"
    published, unpublished = None, None
    if args.published or args.preset:
        from mnemoflow.report.compare import load_run

        ours = load_run(summary)
        if (
            args.preset
            and not args.published
            and not read_preset(args.preset, args.presets).published
        ):
            preset, published = unpublished_preset(args, ours)
            unpublished = preset.compare  # the paper published no numbers: ours, with the reason
        else:
            _, (cells, taus, ranks) = published_comparison(args, ours)
            published = {"cells": cells, "taus": taus, "ranks": ranks}
    page = build_report(
        summary,
        sorted(results.glob(args.judgements)),
        sorted(results.glob(args.ledgers)),
        config,
        out,
        diagnosis_path=diagnosis,
        title=args.title,
        published=published,
        unpublished=unpublished,
        drill=None
        if args.no_questions
        else drill_frames(results, sorted(results.glob(args.judgements)), config),
    )
    print(f"{page}: open it in a browser (derived TSV/SVG in {page.with_suffix('')}/)")
    if args.screenshot is not None:
        try:
            png = screenshot(page, args.screenshot)
        except ScreenshotError as exc:
            raise ValueError(f"screenshot: {exc}") from exc
        print(f"{png}: screenshot")
    return 0


def drill_frames(results: Path, judgements: list[Path], config: dict):
    """The drill-down's inputs found by their conventional names under ``results``: answers
    (static QA shards, feedback steps), each benchmark's prepared questions and sessions, the
    static QA shards' memory snapshots (for the per-question diagnosis), and AMemGym's
    per-question scores, replies and environment (``{benchmark}/environment/data.json``, else
    the config's ``source.path``)."""
    import pandas as pd

    from mnemoflow.data.tables import read_table
    from mnemoflow.protocols.static_qa import question_causes
    from mnemoflow.report.drilldown import read_frames

    answers = sorted(results.glob("*/*/*/step*/answers.parquet")) + sorted(
        results.glob("*/*/*/step*/shard*/answers.parquet")
    )
    questions = sorted(results.glob("*/prepared/questions.parquet"))
    shards = [p.parent for p in answers if (p.parent / "memory" / "stored_ids.json").is_file()]
    causes = None
    if shards and questions:
        frames = [read_table(p, "judgements") for p in judgements]
        frames = [f for f in frames if not f.empty]
        if frames:
            causes = question_causes(
                shards,
                pd.concat(frames, ignore_index=True),
                pd.concat([read_table(p, "questions") for p in questions], ignore_index=True),
            )
    interactive = sorted(
        {p.parent.parent for p in results.glob("*/*/*/step*/shard*/checkpoint_replies.parquet")}
    )
    environments = {}
    for step in interactive:
        benchmark = step.relative_to(results).parts[0]
        own = results / benchmark / "environment" / "data.json"
        source = ((config.get("benchmarks") or {}).get(benchmark) or {}).get("source") or {}
        path = own if own.is_file() else source.get("path")
        if path is not None and Path(path).is_file():
            environments[benchmark] = path
    return read_frames(
        answers=answers,
        questions=questions,
        sessions=sorted(results.glob("*/prepared/sessions.parquet")),
        causes=causes,
        amemgym_scores=[s / "question_scores.parquet" for s in interactive],
        checkpoint_replies=[
            p for s in interactive for p in sorted(s.glob("shard*/checkpoint_replies.parquet"))
        ],
        recall_replies=[
            p for s in interactive for p in sorted(s.glob("shard*/recall_replies.parquet"))
        ],
        environments=environments,
    )
