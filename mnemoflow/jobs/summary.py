"""Jobs of rules/summarize.smk and report.smk: every run's scores -> summary tables and report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.published import PUBLISHED_DIR, load_published
from mnemoflow.data.tables import read_table, write_atomic_text, write_table
from mnemoflow.jobs.context import log, read_all
from mnemoflow.layout import path_seed
from mnemoflow.report.dossier import SUMMARY_LINES, build_dossier, code_identity
from mnemoflow.report.headline import run_headline
from mnemoflow.report.panel import panel_markdown, read_panel
from mnemoflow.report.reproduction import Request, published_section
from mnemoflow.report.seeds import across_seeds
from mnemoflow.report.summaries import (
    failed_items_lines,
    ledger_labels,
    load_ledger,
    provider_cache,
    run_costs,
    structured_forms,
)
from mnemoflow.report.summary import provider_cache_markdown, summarize, summary_markdown


@dataclass(frozen=True)
class SummarizeFiles:
    scores: list[str]
    diagnoses: list[str]
    summary: str
    diagnosis: str
    table: str
    generation: list[str] = ()
    ledgers: list[str] = ()
    versions: list[str] = ()
    repeats: list[str] = ()  # the scores of repeats 1..N-1, under results/seed{S}/
    published: list[str] = ()
    # `judge.panel` (report/panel.py): the panel's verdicts, the configured judge's, the probe's
    panel: list[str] = ()
    panel_configured: list[str] = ()
    probes: list[str] = ()
    panel_ledgers: list[str] = ()
    judgements: list[str] = ()  # the headline table's intervals, as report.html's


def repeat_summaries(paths: list[str]) -> list[pd.DataFrame]:
    """One summary per repeat: ``paths`` grouped by their ``results/seed{S}/`` folder."""
    seeds: dict[int | None, list[str]] = {}
    for path in paths:
        seeds.setdefault(path_seed(path), []).append(path)
    return [
        summarize([read_table(p, "scores") for p in seeds[s]])
        for s in sorted(seeds, key=lambda s: -1 if s is None else s)
    ]


def summarize_runs(
    files: SummarizeFiles,
    *,
    models: dict[str, dict[str, str]],
    prices: dict[str, Any] | None = None,
    published: dict[str, Any] | None = None,
    benchmarks: dict[str, Any] | None = None,
) -> None:
    """Every run's scores in one table and summary.md, which opens with the headline tables
    report.html opens with (intervals from ``files.judgements``), then ``models``: the backend
    and model that played each role (``llm.types.played_by``; no key, no key variable), and ends
    with each run's cost from its ledgers at ``prices`` (the config's, over the shipped table)
    and, when the config asks (``published``: a paper preset's ``compare:`` and ``published_as``,
    :mod:`mnemoflow.report.reproduction`), the published numbers beside ours.

    With ``repeats: N`` the summary is repeat 0's rows plus each row's mean and sd across the N
    seeds (``report.seeds``; ``files.repeats``: the other repeats' scores)."""
    frame = summarize([read_table(path, "scores") for path in files.scores])
    frame = summarize([frame, across_seeds([frame, *repeat_summaries(files.repeats)])])
    write_table(read_all(files.diagnoses, "diagnosis"), files.diagnosis, "diagnosis")
    write_table(frame, files.summary, "summary")
    generation = read_all(files.generation, "generation_report") if files.generation else None
    ledgers = read_ledgers(files.ledgers)
    costs = run_costs(ledgers, frame, prices) if ledgers else None
    versions = read_versions(files.versions)
    section, lines = published_section(
        files.summary, Request.from_params(published), files.published, benchmarks
    )
    lines += panel_markdown(
        read_panel(files.panel, files.panel_configured, files.probes, files.panel_ledgers)
    )
    judgements = read_all(files.judgements, "judgements")
    headline = run_headline(frame, judgements, (section or {}).get("cells"))
    structured = structured_forms(ledgers)
    text = summary_markdown(
        frame, generation, models, costs, versions, headline, structured=structured
    )
    lines = failed_items_lines(ledgers) + lines + provider_cache_markdown(provider_cache(ledgers))
    lines += SUMMARY_LINES
    text = text.rstrip("\n") + "\n\n" + "\n".join(lines).rstrip("\n") + "\n"
    write_atomic_text(files.table, text)
    log.info("summarized %d score tables into %d rows", len(files.scores), len(frame))


@dataclass(frozen=True)
class ReportFiles:
    summary: str
    diagnosis: str
    judgements: list[str]
    ledgers: list[str]
    html: str
    generation: list[str] = ()
    answers: list[str] = ()
    snapshots: list[str] = ()
    questions: list[str] = ()
    sessions: list[str] = ()
    question_scores: list[str] = ()
    checkpoint_replies: list[str] = ()
    recall_replies: list[str] = ()
    environments: list[str] = ()
    published: list[str] = ()
    versions: list[str] = ()
    panel: list[str] = ()
    panel_configured: list[str] = ()
    probes: list[str] = ()
    panel_ledgers: list[str] = ()


def report(
    files: ReportFiles,
    *,
    config: dict[str, Any],
    environments: dict[str, str] | None = None,
    published: dict[str, Any] | None = None,
    benchmarks: dict[str, Any] | None = None,
) -> None:
    """The report and its per-question drill-down (``environments``: AMemGym benchmark -> its
    data.json, which ``files.environments`` lists for Snakemake); with ``published`` (the
    comparison the config asks for, :mod:`mnemoflow.report.reproduction`) its "Published vs
    ours" section."""
    from mnemoflow.protocols.static_qa import question_causes
    from mnemoflow.report.drilldown import read_frames
    from mnemoflow.report.html import build_report

    causes = None
    if files.snapshots and files.questions:
        causes = question_causes(
            [Path(p).parent for p in files.snapshots],
            read_all(files.judgements, "judgements"),
            read_all(files.questions, "questions"),
        )
    drill = read_frames(
        answers=files.answers,
        questions=files.questions,
        sessions=files.sessions,
        causes=causes,
        amemgym_scores=files.question_scores,
        checkpoint_replies=files.checkpoint_replies,
        recall_replies=files.recall_replies,
        environments=environments or {},
    )
    request = Request.from_params(published)
    section, _ = published_section(files.summary, request, files.published, benchmarks)
    dossier = run_dossier(files, config, section, request, environments or {})
    build_report(
        files.summary,
        files.judgements,
        files.ledgers,
        config,
        files.html,
        diagnosis_path=files.diagnosis,
        generation_paths=list(files.generation),
        published=section,
        published_missing=request.missing if request is not None else "",
        unpublished=request.unpublished if request is not None else None,
        drill=drill,
        data_versions=read_versions(files.versions),
        panel=read_panel(files.panel, files.panel_configured, files.probes, files.panel_ledgers),
        dossier=dossier,
    )
    log.info("report written to %s", files.html)


def run_dossier(
    inputs: ReportFiles,
    config: dict[str, Any],
    section: dict[str, pd.DataFrame] | None,
    request: Request | None,
    environments: dict[str, str],
) -> dict[str, Any]:
    """The report's ``dossier.json`` (:mod:`mnemoflow.report.dossier`) from the report rule's
    ``inputs`` (``environments``: AMemGym benchmark -> its data.json)."""
    from mnemoflow.eval.static_qa.judge_prompts import prompt_fingerprints
    from mnemoflow.llm.addresses import redact

    summary = read_table(inputs.summary, "summary")
    ledgers = read_ledgers(inputs.ledgers)
    cells = (section or {}).get("cells")
    return build_dossier(
        summary,
        ledgers=ledgers,
        costs=run_costs(ledgers, summary, config.get("prices")),
        files={
            "answers": inputs.answers,
            "judgements": inputs.judgements,
            "question_scores": inputs.question_scores,
            "checkpoint_replies": inputs.checkpoint_replies,
            "recall_replies": inputs.recall_replies,
        },
        versions=inputs.versions,
        prepared=[*inputs.questions, *inputs.sessions],
        environments=environments,
        judge_prompts=prompt_fingerprints(),
        cells=cells,
        published=load_published(inputs.published or PUBLISHED_DIR)
        if cells is not None and request is not None and request.shipped
        else None,
        benchmark=request.benchmark if request is not None else None,
        code=code_identity(),
        address=redact,
    )


def read_ledgers(paths: list[str]) -> list:
    """Every ledger, labelled by its path below the folder the paths share."""
    paths = list(paths)
    return [load_ledger(p, label) for p, label in zip(paths, ledger_labels(paths), strict=True)]


def read_versions(paths: list[str]) -> dict[str, dict[str, Any]]:
    """benchmark -> its ``results/{benchmark}/prepared/data_version.json``."""
    return {
        Path(p).parent.parent.name: json.loads(Path(p).read_text(encoding="utf-8")) for p in paths
    }
