"""The job of rules/data.smk: a benchmark's source -> the unified tables every family reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.data.errata import data_version
from mnemoflow.data.registry import load_benchmark, notes_text, records_note
from mnemoflow.data.sources import CATALOG
from mnemoflow.data.tables import write_atomic_text, write_table
from mnemoflow.jobs.context import RunKeys, log


@dataclass(frozen=True)
class PrepareFiles:
    sessions: str
    questions: str
    episode_sessions: str
    dialogues: str
    data_version: str | None = None
    notes: str | None = None
    source: list[str] = field(default_factory=list)
    errata: list[str] = field(default_factory=list)


def prepare(files: PrepareFiles, run: RunKeys, *, spec: dict[str, Any]) -> None:
    """The tables carry the benchmark as the config names it (``run.benchmark``, the name every
    answer, judgement and score carries), not the loader's name: two entries of one loader
    (``locomo10`` and ``locomo10_errata``) stay apart, and a join on (benchmark, question_id)
    matches. The loader is recorded in ``data_version.json``."""
    prepared = load_benchmark(spec).renamed(run.benchmark)
    source = files.source[0] if files.source else None
    version = {
        "loader": spec.get("loader"),
        **data_version(source, prepared.errata, _pinned_source(spec)),
    }
    version["records"] = records_note(prepared)
    if files.data_version is not None:
        write_atomic_text(files.data_version, json.dumps(version, indent=2) + "\n")
    log.info("data version %s", version["id"])
    write_table(prepared.sessions, files.sessions, "sessions")
    write_table(prepared.questions, files.questions, "questions")
    write_table(prepared.episode_sessions, files.episode_sessions, "episode_sessions")
    write_table(prepared.dialogues, files.dialogues, "dialogues")
    for note in prepared.notes:
        log.warning("%s", note)
    if files.notes is not None:
        write_atomic_text(files.notes, notes_text(prepared))
    log.info(
        "prepared %d turns, %d questions, %d episodes",
        len(prepared.sessions),
        len(prepared.questions),
        prepared.episode_sessions.episode_id.nunique(),
    )


def _pinned_source(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The entry's ``source``, else its loader's catalogued default (a pinned download)."""
    if spec.get("source"):
        return spec["source"]
    info = CATALOG.get(str(spec.get("loader")))
    return info.sources.get("default") if info is not None else None
