"""Jobs of the interactive protocols (AMemGym, rules/dialogues.smk): the procedural environment,
dialogues (live) or their replay, the upper bound, and each step's scores.

The benchmark's knobs (schedule, replay source, upper-bound scoring) are read by their owner,
``mnemoflow.protocols.interactive``; the score rows are built by
``mnemoflow.eval.amemgym.amemgym_rows``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from mnemoflow.agents.self_evolution import EVOLUTION
from mnemoflow.data import amemgym_procedural
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.tables import DIAGNOSIS, SCORES, read_table, write_table
from mnemoflow.eval.amemgym.amemgym_rows import diagnosis_rows, evolution_rows, summary_rows
from mnemoflow.eval.amemgym.amemgym_score import score_replies
from mnemoflow.eval.imported import IMPORTED
from mnemoflow.jobs.context import JobEnv, RunKeys, log, read_all, tick, write_ledger
from mnemoflow.jobs.progress import progress
from mnemoflow.protocols import interactive
from mnemoflow.protocols.static_qa import shard_episodes
from mnemoflow.protocols.step import StepContext


@dataclass(frozen=True)
class EnvironmentFiles:
    environment: str


def generate_environment(files: EnvironmentFiles, *, spec: dict[str, Any]) -> None:
    """A procedural environment (mnemoflow.data.amemgym_procedural) from the benchmark's
    ``generate: {users, periods, seed}``, written as ``environment`` (a data.json)."""
    out = Path(files.environment)
    if out.name != "data.json":
        raise ValueError(f"generate_amemgym: the output must be named data.json, got {out}")
    users, periods, seed = (spec[key] for key in ("users", "periods", "seed"))
    data = amemgym_procedural.generate({"users": users, "periods": periods, "seed": seed})
    amemgym_procedural.write_data(data, out.parent)
    log.info("generated %d users with %d update periods (seed %d)", users, periods, seed)


@dataclass(frozen=True)
class DialoguesFiles:
    environment: str
    previous: str | None
    dialogues: str
    snapshot: str
    replies: str
    recall: str
    ledger: str
    evolution: str | None = None  # self-evolution records (empty unless the system evolves)
    source: str | None = None  # replay: the source system's transcripts of this period


def dialogues(
    files: DialoguesFiles,
    run: RunKeys,
    env: JobEnv,
    *,
    system: dict[str, Any],
    n_shards: int,
    schedule: dict[str, Any],
) -> None:
    """Converse (or replay) period ``run.step`` of this shard's users from snapshot step-1."""
    users = read_environment(files.environment)
    # an imported system's file names only users of the environment, whichever shard has them
    interactive.imported_output(system, users, f"config systems.{run.system}", shard=False)
    mine = set(shard_episodes([u.id for u in users], run.shard, n_shards))
    users = [u for u in users if u.id in mine]
    source_rows = None
    if files.source:
        source_rows = read_table(files.source, "dialogues")
        source_rows = source_rows[source_rows.step == run.step].reset_index(drop=True)
    gateway = env.gateway()
    label = f"{run.protocol} {run.benchmark}/{run.system} step {run.step}"

    async def converse() -> interactive.StepResult:
        async with gateway:
            with progress(len(users), label) as bar:
                return await interactive.run_step(
                    users,
                    run.step,
                    StepContext(system, gateway, run.row(), env.seed, tick(bar)),
                    Path(files.previous) if files.previous else None,
                    Path(files.snapshot),
                    interactive.Schedule(**schedule),
                    source=source_rows,
                    source_name=str(files.source),
                )

    result = asyncio.run(converse())
    imported = system.get("type") == IMPORTED
    write_table(result.dialogues, files.dialogues, "dialogues")
    write_table(result.replies, files.replies, interactive.CHECKPOINT_REPLIES)
    write_table(result.recall, files.recall, interactive.RECALL_REPLIES)
    if files.evolution:
        write_table(result.evolution, files.evolution, EVOLUTION)
    write_ledger(
        gateway,
        files.ledger,
        stage=run.protocol,
        users=len(users),
        turns=len(result.dialogues),
        checkpoint_parse_failures=int((~result.replies.parse_ok.astype(bool)).sum()),
        evolution_parse_failures=int((~result.evolution.parse_ok.astype(bool)).sum()),
        # an imported system's replies were read from its eval-output, not asked
        **({"imported": f"{system['path']} sha256 {system['sha256']}"} if imported else {}),
    )
    log.info("%s: %d users, %d turns", label, len(users), len(result.dialogues))


@dataclass(frozen=True)
class UpperBoundFiles:
    environment: str
    replies: str
    ledger: str


def upper_bound(files: UpperBoundFiles, env: JobEnv, *, schedule: dict[str, Any]) -> None:
    """The agent's model given each option's state, no memory: once per benchmark."""
    users = read_environment(files.environment)
    gateway = env.gateway()
    total = sum(len(q.choices) for u in users for q in u.questions)

    async def ask() -> pd.DataFrame:
        async with gateway:
            with progress(total, "upper bound") as bar:
                return await interactive.upper_bound(
                    users, gateway, interactive.Schedule(**schedule), progress=tick(bar)
                )

    frame = asyncio.run(ask())
    write_table(frame, files.replies, interactive.UPPER_BOUND_REPLIES)
    write_ledger(gateway, files.ledger, stage="upper_bound", replies=len(frame))


def _write_any(frame: pd.DataFrame, path: str) -> None:
    """Write a table whose columns the scorer owns (schema taken from the frame)."""
    write_table(frame, path, pa.Schema.from_pandas(frame, preserve_index=False))


#: The tables :func:`score_step` writes into a step's folder.
STEP_OUTPUTS = ("scores", "question_scores", "diagnosis", "period_scores")


@dataclass(frozen=True)
class ScoreFiles:
    environment: str
    replies: list[str]
    recall: list[str]
    upper: str
    scores: str
    question_scores: str
    diagnosis: str
    period_scores: str
    evolution: list[str] = ()


def score_step(step: ScoreFiles, run: RunKeys, *, reference_upper_bound: bool) -> None:
    """Step k's scores from the replies of periods 0..k (``score_replies`` of
    ``mnemoflow.eval.amemgym.amemgym_score``): period k's values, and the mean over periods 0..k (at
    the last step, the reference's reported number). The diagnosis of period k needs the recall at
    the checkpoints where each info type last changed, hence the earlier periods."""
    users = read_environment(step.environment)
    checkpoint = read_all(step.replies, interactive.CHECKPOINT_REPLIES)
    recalled = read_all(step.recall, interactive.RECALL_REPLIES)
    bound = read_table(step.upper, interactive.UPPER_BOUND_REPLIES)
    columns = interactive.SCORER_COLUMNS
    per_question, per_period = score_replies(
        users,
        checkpoint[columns["replies"]],
        bound[columns["upper"]],
        # no probe at all: an imported system's file kept none, its answers are undiagnosable
        recalled[columns["recall"]] if len(recalled) or not len(checkpoint) else None,
        reference_upper_bound=reference_upper_bound,
    )
    keys = run.row()
    counts = checkpoint.groupby("period").size().to_dict()
    if "period" in per_question.columns:
        per_question = per_question[per_question["period"] == run.step]
    _write_any(per_question.reset_index(drop=True), step.question_scores)
    _write_any(per_period, step.period_scores)
    rows = summary_rows(per_period, keys, counts)
    evolved = evolution_rows(read_all(list(step.evolution), EVOLUTION), keys)
    if len(evolved):
        rows = pd.concat([rows, evolved], ignore_index=True)
    write_table(rows, step.scores, SCORES)
    write_table(diagnosis_rows(per_period, keys, counts), step.diagnosis, DIAGNOSIS)
    log.info("scored %d checkpoint replies of %s/%s", len(checkpoint), run.system, run.protocol)


def steps_writing(
    steps: list[dict[str, Any]], outputs: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """``steps`` (a job's per-step files from its params), checked to write exactly the rule's
    ``outputs`` (name -> files): a rule and its params cannot drift apart silently."""
    for name, declared in outputs.items():
        written = [step[name] for step in steps]
        if sorted(written) != sorted(declared):
            missing = sorted(set(declared) - set(written))
            extra = sorted(set(written) - set(declared))
            raise ValueError(
                f"params.steps: output {name!r} does not match the rule's "
                f"(missing {missing[:3]}, not declared {extra[:3]})"
            )
    return steps


@contextmanager
def naming_step(path: str) -> Iterator[None]:
    """A failure inside names the step it happened in (the job scores many steps)."""
    try:
        yield
    except Exception as error:
        error.add_note(f"while scoring the step of {path}")
        raise


@dataclass(frozen=True)
class ScoreStepsFiles:
    """Every file of the run's interactive scoring job (the union of its steps' files)."""

    environment: list[str]
    replies: list[str]
    recall: list[str]
    upper: list[str]
    evolution: list[str]
    scores: list[str]
    question_scores: list[str]
    diagnosis: list[str]
    period_scores: list[str]


def score(files: ScoreStepsFiles, *, steps: list[dict[str, Any]]) -> None:
    """Every interactive step of the run, one :func:`score_step` each (``steps``: each step's run
    keys, files and ``reference_upper_bound``, from the rule's params)."""
    outputs = {name: getattr(files, name) for name in STEP_OUTPUTS}
    for step in steps_writing(steps, outputs):
        knobs = ("run", "reference_upper_bound")
        step_files = ScoreFiles(**{k: v for k, v in step.items() if k not in knobs})
        with naming_step(step_files.scores):
            score_step(
                step_files,
                RunKeys(**step["run"]),
                reference_upper_bound=step["reference_upper_bound"],
            )
