"""One function per rule of the learning-from-feedback family (rules/feedback.smk).

Like :mod:`mnemoflow.jobs`: read the rule's inputs, call :mod:`mnemoflow.protocols.feedback`, write
the outputs atomically and the gateway's ledger beside them. Every value arrives as a keyword from
the rule's ``params``; the feedback settings a rule does not receive cannot re-run it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from mnemoflow.data.tables import QUESTION_SCORES, empty, read_table, write_table
from mnemoflow.jobs import _gateway, _tick, _write_ledger
from mnemoflow.progress import progress
from mnemoflow.protocols import feedback as fb

log = logging.getLogger("mnemoflow")


def _config(settings: dict[str, Any]) -> fb.FeedbackConfig:
    return fb.FeedbackConfig(**{k: v for k, v in settings.items() if v is not None})


def _keys(benchmark: str, system: str, protocol: str, step: int) -> dict[str, Any]:
    return {"benchmark": benchmark, "system": system, "protocol": protocol, "step": step}


def _run(gateway, coroutine):
    async def run():
        try:
            return await coroutine
        finally:
            await gateway.aclose()

    return asyncio.run(run())


def train_dialogues(
    *,
    questions: str,
    sessions: str,
    dialogues: str,
    out: str,
    ledger: str,
    benchmark: str,
    system_name: str,
    system: dict[str, Any],
    source: str,
    loader: str,
    settings: dict[str, Any],
    models: dict[str, Any],
    limits: dict[str, Any] | None = None,
    cache: str | None,
    seed: int,
) -> None:
    """The set's training dialogues: the release's (``source: data``) or generated live."""
    asked = read_table(questions, "questions")
    keys = _keys(benchmark, system_name, "train_dialogues", 0)
    gateway = _gateway(models, cache, limits)
    if source == "data":
        frame = fb.data_dialogues(
            read_table(dialogues, "dialogues"), asked, system.get("type", ""), keys
        )
    else:
        n = int((asked["split"] == "train").sum())
        with progress(n, f"dialogues {benchmark}/{system_name}", unit="dialogue") as bar:
            frame = _run(
                gateway,
                fb.generate_train_dialogues(
                    asked,
                    read_table(sessions, "sessions"),
                    system,
                    keys,
                    gateway,
                    _config(settings),
                    fb.metrics_module(loader),
                    seed,
                    progress=_tick(bar),
                ),
            )
    write_table(frame, out, "dialogues")
    _write_ledger(gateway, ledger, stage="train_dialogues", dialogues=frame.dialogue_id.nunique())


def step(
    *,
    questions: str,
    sessions: str,
    train: str | None,
    previous: str | None,
    out: dict[str, str],
    benchmark: str,
    system_name: str,
    system: dict[str, Any],
    protocol: str,
    step: int,
    loader: str,
    settings: dict[str, Any],
    models: dict[str, Any],
    limits: dict[str, Any] | None = None,
    cache: str | None,
    seed: int,
) -> None:
    """One step of a feedback protocol in one job: the step's dialogues (a batch of training
    dialogues, or live on-policy ones read with snapshot k-1), memorized on top of snapshot k-1,
    the asked split answered from the new snapshot and scored. ``out`` names the outputs:
    dialogues, snapshot, answers, scores, question_scores, judgements, diagnosis, ledger."""
    keys = _keys(benchmark, system_name, protocol, step)
    config = _config(settings)
    gateway = _gateway(models, cache, limits)
    asked = read_table(questions, "questions")
    turns = read_table(sessions, "sessions")
    metrics = fb.metrics_module(loader)
    live = protocol == "on_policy" and step > 0
    n_live = min(config.batch_size, int((asked["split"] == "train").sum())) if live else 0
    n_asked = int((asked["split"] == fb.asked_split(protocol)).sum())
    label = f"{benchmark}/{system_name} {protocol} step {step}"

    async def run():
        try:
            if live:
                with progress(n_live, f"converse {label}", unit="dialogue") as bar:
                    dialogues = await fb.live_step(
                        step, asked, Path(previous), system, keys, gateway, config, metrics,
                        seed, progress=_tick(bar),
                    )  # fmt: skip
            elif protocol == "on_policy":
                dialogues = empty("dialogues")
            else:
                recorded = read_table(train, "dialogues")
                ids = fb.step_dialogues(protocol, step, recorded, config)
                dialogues = fb.select_dialogues(recorded, ids, keys)
            manifest = await fb.ingest_step(
                protocol, step, dialogues, asked, turns, system,
                Path(previous) if previous else None, Path(out["snapshot"]), gateway, seed,
            )  # fmt: skip
            with progress(n_asked, f"answer {label}") as bar:
                answers = await fb.answer_step(
                    protocol, asked, turns, Path(out["snapshot"]), system, keys, gateway,
                    config, seed, progress=_tick(bar),
                )  # fmt: skip
            scored = await fb.score_step(
                answers, asked, dialogues, keys, gateway, metrics, _judge_name(gateway, metrics)
            )
            return dialogues, manifest, answers, scored
        finally:
            await gateway.aclose()

    dialogues, manifest, answers, scored = asyncio.run(run())
    write_table(dialogues, out["dialogues"], "dialogues")
    write_table(answers, out["answers"], "answers")
    _write_scored(scored, out)
    holds = {k: len(v) for k, v in manifest["holds"].items()}
    _write_ledger(gateway, out["ledger"], stage="step", holds=holds, questions=len(answers))


def _judge_name(gateway, metrics) -> str:
    return f"{gateway.model_name('judge')}/{metrics.__name__.rsplit('.', 1)[-1]}"


def _write_scored(scored: fb.StepScores, out: dict[str, str]) -> None:
    write_table(scored.judgements, out["judgements"], "judgements")
    write_table(scored.question_scores, out["question_scores"], QUESTION_SCORES)
    write_table(empty("diagnosis"), out["diagnosis"], "diagnosis")
    write_table(scored.scores, out["scores"], "scores")


def train_performance(
    *,
    questions: str,
    sessions: str,
    snapshot: str,
    dialogues: str,
    out: dict[str, str],
    benchmark: str,
    system_name: str,
    system: dict[str, Any],
    loader: str,
    settings: dict[str, Any],
    models: dict[str, Any],
    limits: dict[str, Any] | None = None,
    cache: str | None,
    seed: int,
) -> None:
    """The training split asked of the off-policy memory (no memory of its own)."""
    keys = _keys(benchmark, system_name, "train_performance", 0)
    gateway = _gateway(models, cache, limits)
    asked = read_table(questions, "questions")
    metrics = fb.metrics_module(loader)
    n_asked = int((asked["split"] == "train").sum())

    async def run():
        try:
            with progress(n_asked, f"answer {benchmark}/{system_name} train_performance") as bar:
                answers = await fb.answer_step(
                    "train_performance", asked, read_table(sessions, "sessions"),
                    Path(snapshot), system, keys, gateway, _config(settings), seed,
                    progress=_tick(bar),
                )  # fmt: skip
            scored = await fb.score_step(
                answers, asked, read_table(dialogues, "dialogues"), keys, gateway, metrics,
                _judge_name(gateway, metrics),
            )  # fmt: skip
            return answers, scored
        finally:
            await gateway.aclose()

    answers, scored = asyncio.run(run())
    write_table(answers, out["answers"], "answers")
    _write_scored(scored, out)
    _write_ledger(gateway, out["ledger"], stage="train_performance", questions=len(answers))


def normalize(
    *,
    question_scores: str,
    questions: str,
    out: str,
    benchmark: str,
    system_name: str,
    protocol: str,
    step: int,
    set_name: str,
    configs: str,
    stats: str,
) -> None:
    frame = fb.normalized_rows(
        read_table(question_scores, QUESTION_SCORES),
        read_table(questions, "questions"),
        set_name,
        configs,
        stats,
        _keys(benchmark, system_name, protocol, step),
    )
    write_table(frame, out, "scores")
    log.info("normalized %s: %s", set_name, dict(zip(frame.metric, frame.value, strict=True)))
