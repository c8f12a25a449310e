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
from mnemoflow.commands.compare import add_published_arguments, published_comparison


@COMMANDS.register("report", help="build results/report.html from result tables")
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
    published = None
    if args.published or args.preset:
        from mnemoflow.report.compare import load_run

        _, (cells, taus, ranks) = published_comparison(args, load_run(summary))
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
    )
    print(f"{page}: open it in a browser (derived TSV/SVG in {page.with_suffix('')}/)")
    if args.screenshot is not None:
        try:
            png = screenshot(page, args.screenshot)
        except ScreenshotError as exc:
            raise ValueError(f"screenshot: {exc}") from exc
        print(f"{png}: screenshot")
    return 0
