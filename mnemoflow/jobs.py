"""One function per workflow rule: read the rule's inputs, call the protocol, write its outputs.

Scripts in ``scripts/`` are one-line calls into this module, so every rule's behaviour is plain,
importable and testable Python. Each job builds its own :class:`Gateway` on the shared response
cache and writes the gateway's ledger beside its output. Outputs are written atomically; a failed
job leaves nothing that looks finished.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import QUESTION_SCORES, empty, read_table, write_atomic_text, write_table
from mnemoflow.eval.judges import judge_provenance
from mnemoflow.llm.gateway import Gateway
from mnemoflow.progress import Progress, progress
from mnemoflow.protocols import static_qa
from mnemoflow.report.summary import summarize, summary_markdown

log = logging.getLogger("mnemoflow")


@contextmanager
def job_log(path: str | Path | None) -> Iterator[None]:
    """Send this job's logging and stderr to the rule's log file (Snakemake style)."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        old_stderr = sys.stderr
        sys.stderr = handle
        logging.basicConfig(
            stream=handle, level=logging.INFO, format="%(asctime)s %(message)s", force=True
        )
        try:
            yield
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            sys.stderr = old_stderr


def _tick(bar: Progress):
    """Adapt a progress bar to the protocol's per-item callback (cache hit or None)."""
    return lambda cache_hit: bar.update(1, cache_hit=cache_hit)


def _gateway(
    models: dict[str, Any],
    cache: str | None,
    limits: dict[str, Any] | None = None,
    only_given: bool = False,
) -> Gateway:
    """``limits``: the job's share of each endpoint it calls (mnemoflow.llm.limits).
    ``only_given``: a role the job's params do not bind fails when used (ingest and answer get
    only the roles their memory system declares, so an undeclared use must not go unnoticed)."""
    return Gateway.from_config(models, cache, limits, only_given=only_given)


def _write_ledger(gateway: Gateway, path: str | Path, **extra: Any) -> None:
    write_atomic_text(path, gateway.ledger.to_json({"roles": gateway.describe(), **extra}))
    totals = gateway.ledger.totals()
    log.info(
        "%s: %d model calls, %d cache hits, %d tokens in, %d out, %d parse failures",
        extra.get("stage", "job"),
        totals.calls,
        totals.cache_hits,
        totals.tokens_in,
        totals.tokens_out,
        totals.parse_failures,
    )


def prepare(
    spec: dict[str, Any], sessions: str, questions: str, episode_sessions: str, dialogues: str
) -> None:
    prepared = load_benchmark(spec)
    write_table(prepared.sessions, sessions, "sessions")
    write_table(prepared.questions, questions, "questions")
    write_table(prepared.episode_sessions, episode_sessions, "episode_sessions")
    write_table(prepared.dialogues, dialogues, "dialogues")
    for note in prepared.notes:
        log.warning("%s", note)
    log.info(
        "prepared %d turns, %d questions, %d episodes",
        len(prepared.sessions),
        len(prepared.questions),
        prepared.episode_sessions.episode_id.nunique(),
    )


def ingest(
    *,
    sessions: str,
    episode_sessions: str,
    previous: str | None,
    snapshot: str,
    ledger: str,
    system: dict[str, Any],
    step: int,
    shard: int,
    n_shards: int,
    models: dict[str, Any],
    cache: str | None,
    limits: dict[str, Any] | None = None,
    seed: int,
) -> None:
    turns = read_table(sessions, "sessions")
    episode_map = read_table(episode_sessions, "episode_sessions")
    episodes = static_qa.shard_episodes(episode_map.episode_id, shard, n_shards)
    gateway = _gateway(models, cache, limits, only_given=True)

    async def run() -> dict[str, Any]:
        with progress(len(episodes), f"ingest step {step}", unit="episode") as bar:
            try:
                return await static_qa.ingest(
                    turns,
                    episode_map,
                    episodes,
                    system,
                    step,
                    Path(previous) if previous else None,
                    Path(snapshot),
                    gateway,
                    seed=seed,
                    progress=_tick(bar),
                )
            finally:
                await gateway.aclose()

    manifest = asyncio.run(run())
    _write_ledger(gateway, ledger, stage="ingest", episodes=len(manifest["episodes"]))
    log.info("ingested step %d of %d episodes", step, len(episodes))


def _step_questions(questions: str, step: int, shard: int, n_shards: int) -> pd.DataFrame:
    frame = read_table(questions, "questions")
    episodes = set(static_qa.shard_episodes(frame.episode_id, shard, n_shards))
    return frame[(frame.checkpoint == step) & frame.episode_id.isin(episodes)]


def answer(
    *,
    questions: str,
    sessions: str,
    episode_sessions: str,
    snapshot: str,
    answers: str,
    ledger: str,
    benchmark: str,
    system_name: str,
    system: dict[str, Any],
    step: int,
    shard: int,
    n_shards: int,
    reader: str | dict[str, Any] | None,
    use_options: bool,
    models: dict[str, Any],
    cache: str | None,
    limits: dict[str, Any] | None = None,
    seed: int,
) -> None:
    todo = _step_questions(questions, step, shard, n_shards)
    turns = read_table(sessions, "sessions")
    episode_map = read_table(episode_sessions, "episode_sessions")
    gateway = _gateway(models, cache, limits, only_given=True)
    keys = static_qa.run_keys(benchmark, system_name, step)

    async def run() -> pd.DataFrame:
        with progress(len(todo), f"answer {benchmark}/{system_name} step {step}") as bar:
            try:
                return await static_qa.answer(
                    todo,
                    Path(snapshot),
                    system,
                    keys,
                    gateway,
                    reader,
                    use_options,
                    seed,
                    sessions=turns,
                    episode_sessions=episode_map,
                    progress=_tick(bar),
                )
            finally:
                await gateway.aclose()

    frame = asyncio.run(run())
    write_table(frame, answers, "answers")
    _write_ledger(gateway, ledger, stage="answer", questions=len(frame))
    log.info("answered %d questions", len(frame))


def judge(
    *,
    questions: str,
    answers: str,
    judgements: str,
    ledger: str,
    kind: str,
    repeats: int,
    seed: int,
    models: dict[str, Any],
    cache: str | None,
    limits: dict[str, Any] | None = None,
    settings: str,
) -> None:
    """Judge a shard's answers; ``settings`` gets the judge's provenance (``judge.json``)."""
    answered = read_table(answers, "answers")
    gateway = _gateway(models, cache, limits)
    provenance = judge_provenance(gateway, kind, repeats, seed)  # warns if temperature != 0
    runs = sorted({f"{r.benchmark}/{r.system} step {r.step}" for r in answered.itertuples()})
    desc = f"judge {', '.join(runs) or kind}"

    async def run() -> pd.DataFrame:
        try:
            return await static_qa.judge(
                answered,
                read_table(questions, "questions"),
                gateway,
                kind,
                repeats,
                seed,
                progress=lambda calls: progress(calls, desc),
            )
        finally:
            await gateway.aclose()

    frame = asyncio.run(run())
    write_table(frame, judgements, "judgements")
    write_atomic_text(settings, json.dumps(provenance, indent=2) + "\n")
    _write_ledger(gateway, ledger, stage="judge", judgements=len(frame), judge=provenance)


def _concat(paths: list[str], schema: str) -> pd.DataFrame:
    frames = [read_table(path, schema) for path in paths]
    return pd.concat(frames, ignore_index=True) if frames else empty(schema)


def score(
    *,
    judgements: list[str],
    answers: list[str],
    snapshots: list[str],
    questions: str,
    sessions: str,
    scores: str,
    question_scores: str,
    diagnosis: str,
    kind: str,
) -> None:
    stored, known = static_qa.read_stored([Path(p) for p in snapshots])
    scored = static_qa.score(
        _concat(judgements, "judgements"),
        _concat(answers, "answers"),
        read_table(questions, "questions"),
        read_table(sessions, "sessions"),
        kind,
        stored,
        known,
    )
    write_table(scored.question_scores, question_scores, QUESTION_SCORES)
    write_table(scored.diagnosis, diagnosis, "diagnosis")
    write_table(scored.scores, scores, "scores")
    log.info("scored %d judgements from %d shards", len(scored.question_scores), len(judgements))


def summarize_runs(
    *,
    scores: list[str],
    diagnoses: list[str],
    summary: str,
    diagnosis: str,
    table: str,
    generation: list[str] = (),
) -> None:
    frame = summarize([read_table(path, "scores") for path in scores])
    write_table(_concat(diagnoses, "diagnosis"), diagnosis, "diagnosis")
    write_table(frame, summary, "summary")
    reports = _concat(list(generation), "generation_report") if generation else None
    write_atomic_text(table, summary_markdown(frame, reports))
    log.info("summarized %d score tables into %d rows", len(scores), len(frame))


def snakemake_params(params: Any) -> dict[str, Any]:
    """Snakemake's Params object as a plain dict (JSON round trip drops Snakemake's wrappers).

    ``code`` (every rule's fingerprint of the package code it runs, see ``mnemoflow.codeversion``)
    is there only so that Snakemake re-runs the job when that code changes; no job reads it.
    """
    plain = json.loads(json.dumps(dict(params.items())))
    plain.pop("code", None)
    return plain


def report(
    *,
    summary: str,
    judgements: list[str],
    ledgers: list[str],
    html: str,
    config: dict[str, Any],
    diagnosis: str | None = None,
    generation: list[str] = (),
) -> None:
    from mnemoflow.report.html import build_report

    build_report(
        summary,
        judgements,
        ledgers,
        config,
        html,
        diagnosis_path=diagnosis,
        generation_paths=list(generation),
    )
    log.info("report written to %s", html)
