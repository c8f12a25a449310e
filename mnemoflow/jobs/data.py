"""The job of rules/data.smk: a benchmark's source -> the unified tables every family reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import write_table
from mnemoflow.jobs.context import log


@dataclass(frozen=True)
class PrepareFiles:
    sessions: str
    questions: str
    episode_sessions: str
    dialogues: str


def prepare(files: PrepareFiles, *, spec: dict[str, Any]) -> None:
    prepared = load_benchmark(spec)
    write_table(prepared.sessions, files.sessions, "sessions")
    write_table(prepared.questions, files.questions, "questions")
    write_table(prepared.episode_sessions, files.episode_sessions, "episode_sessions")
    write_table(prepared.dialogues, files.dialogues, "dialogues")
    for note in prepared.notes:
        log.warning("%s", note)
    log.info(
        "prepared %d turns, %d questions, %d episodes",
        len(prepared.sessions),
        len(prepared.questions),
        prepared.episode_sessions.episode_id.nunique(),
    )
