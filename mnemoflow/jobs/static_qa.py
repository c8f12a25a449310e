"""Jobs of the static QA chain (rules/memory.smk, answer.smk, judge.smk): ingest, answer, judge,
score — one step's snapshot per shard, its questions answered and judged, then scored over shards.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.data.tables import QUESTION_SCORES, read_table, write_atomic_text, write_table
from mnemoflow.eval.imported import IMPORTED, imported_answers
from mnemoflow.eval.static_qa.judges import judge_provenance
from mnemoflow.jobs.context import JobEnv, RunKeys, log, read_all, tick, write_ledger
from mnemoflow.jobs.progress import progress
from mnemoflow.protocols import static_qa
from mnemoflow.protocols.step import StepContext


@dataclass(frozen=True)
class IngestFiles:
    sessions: str
    episode_sessions: str
    previous: str | None
    snapshot: str
    ledger: str


def ingest(
    files: IngestFiles, run: RunKeys, env: JobEnv, *, system: dict[str, Any], n_shards: int
) -> None:
    """Step k-1's snapshot + step k's sessions of this shard's episodes -> step k's snapshot."""
    turns = read_table(files.sessions, "sessions")
    episode_map = read_table(files.episode_sessions, "episode_sessions")
    episodes = static_qa.shard_episodes(episode_map.episode_id, run.shard, n_shards)
    gateway = env.gateway()

    async def ingest_all() -> dict[str, Any]:
        async with gateway:
            with progress(len(episodes), f"ingest step {run.step}", unit="episode") as bar:
                return await static_qa.ingest(
                    turns,
                    episode_map,
                    episodes,
                    StepContext(system, gateway, seed=env.seed, progress=tick(bar)),
                    run.step,
                    Path(files.previous) if files.previous else None,
                    Path(files.snapshot),
                )

    manifest = asyncio.run(ingest_all())
    write_ledger(gateway, files.ledger, stage="ingest", episodes=len(manifest["episodes"]))
    log.info("ingested step %d of %d episodes", run.step, len(episodes))


@dataclass(frozen=True)
class AnswerFiles:
    questions: str
    sessions: str
    episode_sessions: str
    snapshot: str
    answers: str
    ledger: str
    reader_files: list[str] = ()


def answer(
    files: AnswerFiles,
    run: RunKeys,
    env: JobEnv,
    *,
    system: dict[str, Any],
    n_shards: int,
    reader: str | dict[str, Any] | None,
    use_options: bool,
) -> None:
    """The step's questions of this shard, answered from the step's snapshot."""
    frame = read_table(files.questions, "questions")
    episodes = set(static_qa.shard_episodes(frame.episode_id, run.shard, n_shards))
    todo = frame[(frame.checkpoint == run.step) & frame.episode_id.isin(episodes)]
    turns = read_table(files.sessions, "sessions")
    episode_map = read_table(files.episode_sessions, "episode_sessions")

    gateway = env.gateway()
    failures: dict[str, str] = {}
    if system.get("type") == IMPORTED:  # a published output's answers: no model asked
        where = f"config systems.{run.system}"
        answers, failures = imported_answers(frame, todo, system, run.row(), where)
        write_table(answers, files.answers, "answers")
        source = {k: v for k, v in system.items() if v is not None}
        failed = {"failed_questions": failures} if failures else {}
        write_ledger(
            gateway, files.ledger, stage="answer", questions=len(answers), imported=source, **failed
        )
        log.info("read %d answers from %s, %d missing", len(answers), system["path"], len(failures))
        return

    async def answer_pass():
        failures.clear()  # Batch-API mode runs passes; the last one's are the job's
        label = f"answer {run.benchmark}/{run.system} step {run.step}"
        with progress(len(todo), label) as bar:
            return await static_qa.answer(
                todo,
                Path(files.snapshot),
                StepContext(system, gateway, run.row(), env.seed, tick(bar)),
                reader,
                use_options,
                sessions=turns,
                episode_sessions=episode_map,
                failures=failures,
            )

    async def answer_all():
        async with gateway:
            return await gateway.batched(answer_pass)

    answers = asyncio.run(answer_all())
    write_table(answers, files.answers, "answers")
    failed = {"failed_questions": dict(sorted(failures.items()))} if failures else {}
    write_ledger(gateway, files.ledger, stage="answer", questions=len(answers), **failed)
    log.info("answered %d questions, %d failed", len(answers), len(failures))


@dataclass(frozen=True)
class JudgeFiles:
    questions: str
    answers: str
    judgements: str
    ledger: str
    settings: str
    answers_ledger: str | None = None


def failed_questions(ledger: str | None) -> dict[str, str]:
    """The questions whose answer failed (``failed_questions`` of the answer job's ledger)."""
    if ledger is None or not Path(ledger).is_file():
        return {}
    return json.loads(Path(ledger).read_text(encoding="utf-8")).get("failed_questions", {})


def judge(files: JudgeFiles, env: JobEnv, *, kind: str, repeats: int) -> None:
    """Judge a shard's answers; ``settings`` gets the judge's provenance (``judge.json``).
    The env's seed is the judge's own (``judge.seed`` of the config), not the run's."""
    seed = env.seed
    answered = read_table(files.answers, "answers")
    gateway = env.gateway()
    provenance = judge_provenance(gateway, kind, repeats, seed)  # warns if temperature != 0
    runs = sorted({f"{r.benchmark}/{r.system} step {r.step}" for r in answered.itertuples()})
    desc = f"judge {', '.join(runs) or kind}"

    async def judge_pass():
        return await static_qa.judge(
            answered,
            read_table(files.questions, "questions"),
            gateway,
            kind,
            repeats,
            seed,
            progress=lambda calls: progress(calls, desc),
            failed=failed_questions(files.answers_ledger),
        )

    async def judge_all():
        async with gateway:
            return await gateway.batched(judge_pass)

    frame = asyncio.run(judge_all())
    write_table(frame, files.judgements, "judgements")
    write_atomic_text(files.settings, json.dumps(provenance, indent=2) + "\n")
    write_ledger(gateway, files.ledger, stage="judge", judgements=len(frame), judge=provenance)


@dataclass(frozen=True)
class ScoreFiles:
    judgements: list[str]
    answers: list[str]
    snapshots: list[str]
    questions: str
    sessions: str
    scores: str
    question_scores: str
    diagnosis: str


def score(files: ScoreFiles, *, kind: str) -> None:
    """One step's judgements, answers and snapshots of every shard -> scores and diagnosis."""
    snapshots = [Path(p) for p in files.snapshots]
    stored, known = static_qa.read_stored(snapshots)
    scored = static_qa.score(
        read_all(files.judgements, "judgements"),
        read_all(files.answers, "answers"),
        read_table(files.questions, "questions"),
        read_table(files.sessions, "sessions"),
        kind,
        stored,
        known,
        snapshots,
    )
    write_table(scored.question_scores, files.question_scores, QUESTION_SCORES)
    write_table(scored.diagnosis, files.diagnosis, "diagnosis")
    write_table(scored.scores, files.scores, "scores")
    log.info(
        "scored %d judgements from %d shards", len(scored.question_scores), len(files.judgements)
    )
