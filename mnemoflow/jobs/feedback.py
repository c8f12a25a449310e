"""Jobs of the learning-from-feedback family (rules/feedback.smk): training dialogues, one job per
protocol step, the training split asked of the off-policy memory, and normalization.

``settings`` is the part of the benchmark's ``feedback:`` block the stage reads
(``FeedbackConfig.stage_fields``), so a setting a rule does not pass cannot re-run it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mnemoflow.data.tables import QUESTION_SCORES, empty, read_table, write_table
from mnemoflow.jobs.context import JobEnv, RunKeys, log, tick, write_ledger
from mnemoflow.jobs.progress import progress
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols.step import StepContext


def _config(settings: dict[str, Any]) -> fb.FeedbackConfig:
    return fb.FeedbackConfig.from_spec({"feedback": settings})


@dataclass(frozen=True)
class TrainDialoguesFiles:
    questions: str
    sessions: str
    recorded: str  # the release's pre-generated dialogues (prepared)
    dialogues: str
    ledger: str


def train_dialogues(
    files: TrainDialoguesFiles,
    run: RunKeys,
    env: JobEnv,
    *,
    system: dict[str, Any],
    source: str,
    loader: str,
    settings: dict[str, Any],
    scoring: str = "paper",
) -> None:
    """The set's training dialogues: the release's (``source: data``) or generated live."""
    asked = read_table(files.questions, "questions")
    keys = dataclasses.replace(run, protocol="train_dialogues", step=0).row()
    gateway = env.gateway()
    if source == "data":
        recorded = read_table(files.recorded, "dialogues")
        frame = fb.data_dialogues(recorded, asked, system.get("type", ""), keys)
    else:
        n = int((asked["split"] == "train").sum())

        async def generate():
            async with gateway:
                with (
                    gateway.online(TALK),
                    progress(n, f"dialogues {run.benchmark}/{run.system}", unit="dialogue") as bar,
                ):
                    return await fb.generate_train_dialogues(
                        asked,
                        read_table(files.sessions, "sessions"),
                        StepContext(system, gateway, keys, env.seed, tick(bar)),
                        _config(settings),
                        fb.metrics_module(loader, scoring),
                    )

        frame = asyncio.run(generate())
    write_table(frame, files.dialogues, "dialogues")
    write_ledger(
        gateway, files.ledger, stage="train_dialogues", dialogues=frame.dialogue_id.nunique()
    )


@dataclass(frozen=True)
class ScoredFiles:
    """What every scoring stage writes: the answers, their judgements and scores, the ledger."""

    answers: str
    scores: str
    question_scores: str
    judgements: str
    diagnosis: str
    ledger: str


@dataclass(frozen=True)
class StepFiles(ScoredFiles):
    questions: str
    sessions: str
    train: str | None
    previous: str | None
    dialogues: str
    snapshot: str


def step(
    files: StepFiles,
    run: RunKeys,
    env: JobEnv,
    *,
    system: dict[str, Any],
    loader: str,
    settings: dict[str, Any],
    scoring: str = "paper",
) -> None:
    """One step of a feedback protocol in one job: the step's dialogues (a batch of training
    dialogues, or live on-policy ones read with snapshot k-1), memorized on top of snapshot k-1,
    the asked split answered from the new snapshot and scored."""
    keys = run.row()
    protocol, k = run.protocol, run.step
    config = _config(settings)
    gateway = env.gateway()
    asked = read_table(files.questions, "questions")
    turns = read_table(files.sessions, "sessions")
    metrics = fb.metrics_module(loader, scoring)
    live = fb.is_live(protocol, k)
    n_live = min(config.batch_size, int((asked["split"] == "train").sum())) if live else 0
    n_asked = int((asked["split"] == fb.asked_split(protocol)).sum())
    previous = Path(files.previous) if files.previous else None
    ctx = StepContext(system, gateway, keys, env.seed)

    async def run_step():
        async with gateway:
            if live:
                with (
                    gateway.online(TALK),
                    progress(n_live, f"converse {run.label()}", unit="dialogue") as bar,
                ):
                    dialogues = await fb.live_step(
                        k, asked, previous, replace(ctx, progress=tick(bar)), config, metrics
                    )
            elif protocol == "on_policy":
                dialogues = empty("dialogues")
            else:
                recorded = read_table(files.train, "dialogues")
                ids = fb.step_dialogues(protocol, k, recorded, config)
                dialogues = fb.select_dialogues(recorded, ids, keys)
            snapshot = Path(files.snapshot)
            manifest = await fb.ingest_step(
                protocol, k, dialogues, asked, turns, ctx, previous, snapshot
            )
            with progress(n_asked, f"answer {run.label()}") as bar:
                answers = await fb.answer_step(
                    protocol, asked, turns, snapshot, replace(ctx, progress=tick(bar)), config
                )
            scored = await _scored(answers, asked, dialogues, keys, gateway, metrics)
            return dialogues, manifest, answers, scored

    dialogues, manifest, answers, scored = asyncio.run(run_step())
    write_table(dialogues, files.dialogues, "dialogues")
    write_table(answers, files.answers, "answers")
    _write_scored(scored, files)
    holds = {name: len(ids) for name, ids in manifest["holds"].items()}
    write_ledger(gateway, files.ledger, stage="step", holds=holds, questions=len(answers))


def _judge_name(gateway, metrics) -> str:
    return f"{gateway.model_name('judge')}/{metrics.__name__.rsplit('.', 1)[-1]}"


#: Why a batch judge is asked online in a live dialogue (``Gateway.online``).
TALK = "a dialogue's simulated user scores each reply to decide its next turn"


async def _scored(answers, asked, dialogues, keys, gateway, metrics) -> fb.StepScores:
    """The answers scored; a judge or critic in Batch-API mode scores them in batches (the
    scoring runs again on the cached replies: its requests do not depend on each other's)."""
    judge = _judge_name(gateway, metrics)
    return await gateway.batched(
        lambda: fb.score_step(answers, asked, dialogues, keys, gateway, metrics, judge)
    )


def _write_scored(scored: fb.StepScores, files: ScoredFiles) -> None:
    write_table(scored.judgements, files.judgements, "judgements")
    write_table(scored.question_scores, files.question_scores, QUESTION_SCORES)
    write_table(empty("diagnosis"), files.diagnosis, "diagnosis")
    write_table(scored.scores, files.scores, "scores")


@dataclass(frozen=True)
class TrainPerformanceFiles(ScoredFiles):
    questions: str
    sessions: str
    snapshot: str
    dialogues: str


def train_performance(
    files: TrainPerformanceFiles,
    run: RunKeys,
    env: JobEnv,
    *,
    system: dict[str, Any],
    loader: str,
    settings: dict[str, Any],
    scoring: str = "paper",
) -> None:
    """The training split asked of the off-policy memory (no memory of its own)."""
    keys = run.row()  # the rule's own wildcards: protocol train_performance, step 0
    gateway = env.gateway()
    asked = read_table(files.questions, "questions")
    metrics = fb.metrics_module(loader, scoring)
    n_asked = int((asked["split"] == "train").sum())

    async def ask():
        async with gateway:
            label = f"answer {run.benchmark}/{run.system} train_performance"
            with progress(n_asked, label) as bar:
                answers = await fb.answer_step(
                    "train_performance", asked, read_table(files.sessions, "sessions"),
                    Path(files.snapshot), StepContext(system, gateway, keys, env.seed, tick(bar)),
                    _config(settings),
                )  # fmt: skip
            dialogues = read_table(files.dialogues, "dialogues")
            scored = await _scored(answers, asked, dialogues, keys, gateway, metrics)
            return answers, scored

    answers, scored = asyncio.run(ask())
    write_table(answers, files.answers, "answers")
    _write_scored(scored, files)
    write_ledger(gateway, files.ledger, stage="train_performance", questions=len(answers))


@dataclass(frozen=True)
class NormalizeFiles:
    question_scores: str
    questions: str
    configs: str
    stats: str
    normalized: str


def normalize(files: NormalizeFiles, run: RunKeys, *, set_name: str) -> None:
    """A domain / task set's official normalized scores (average, weighted, z)."""
    frame = fb.normalized_rows(
        read_table(files.question_scores, QUESTION_SCORES),
        read_table(files.questions, "questions"),
        set_name,
        files.configs,
        files.stats,
        run.row(),
    )
    write_table(frame, files.normalized, "scores")
    log.info("normalized %s: %s", set_name, dict(zip(frame.metric, frame.value, strict=True)))
