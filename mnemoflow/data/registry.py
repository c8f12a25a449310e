"""Benchmark loaders by name: each turns one data format into the unified tables.

A loader is a function ``(spec) -> Prepared`` (or a ``(sessions, questions)`` pair); ``spec`` is the
benchmark's entry in config.yaml (``loader``, ``source`` and loader-specific options). Adding a
benchmark touches one module: define the loader and decorate it with :func:`register_loader`
(and name a new module in :data:`LOADERS`' built-in modules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from mnemoflow.data.errata import apply_overlay, load_overlay, overlay_path
from mnemoflow.data.tables import DIALOGUES, EPISODE_SESSIONS
from mnemoflow.data.validate import DataError
from mnemoflow.registry import Registry


@dataclass
class Prepared:
    """A benchmark in unified form: turns, questions, and which sessions each episode reads."""

    sessions: pd.DataFrame
    questions: pd.DataFrame
    episode_sessions: pd.DataFrame | None = None
    #: Conversations the data itself provides (MemoryBench's pre-generated training dialogues).
    dialogues: pd.DataFrame | None = None
    #: One line per data problem the loader repaired or skipped (e.g. malformed evidence ids).
    notes: list[str] = field(default_factory=list)
    #: The errata overlay the entry names (``errata: FILE``), already applied to ``questions``.
    errata: Any = None

    def __post_init__(self) -> None:
        if self.episode_sessions is None:
            self.episode_sessions = derive_episode_sessions(self.sessions)
        if self.dialogues is None:
            self.dialogues = pd.DataFrame(columns=DIALOGUES.names)

    def renamed(self, benchmark: str) -> Prepared:
        """The same tables with ``benchmark`` as every row's benchmark (the config's name of the
        entry, which the runs' tables carry), where a table has that column."""
        tables = {}
        for name in ("sessions", "questions", "episode_sessions", "dialogues"):
            table = getattr(self, name)
            if "benchmark" in table.columns:
                table = table.assign(benchmark=benchmark)
            tables[name] = table
        return replace(self, **tables)


def derive_episode_sessions(sessions: pd.DataFrame) -> pd.DataFrame:
    """The episode -> session map of a benchmark whose sessions each belong to one episode."""
    columns = EPISODE_SESSIONS.names
    if sessions.empty:
        return pd.DataFrame(columns=columns)
    first = sessions.drop_duplicates(["episode_id", "session_id"])
    return first[columns].sort_values(["episode_id", "session_index"]).reset_index(drop=True)


Loader = Callable[[dict[str, Any]], "Prepared | tuple[pd.DataFrame, pd.DataFrame]"]
StepCounter = Callable[[dict[str, Any]], int]

#: Loaders by name; each built-in module registers its own when imported.
LOADERS = Registry(
    "benchmark loader",
    builtin_modules=[
        "mnemoflow.data.synthetic",
        "mnemoflow.data.locomo",
        "mnemoflow.data.longmemeval",
        "mnemoflow.data.memorybench",
        "mnemoflow.data.amemgym",
        "mnemoflow.data.synthetic_feedback",
    ],
)


def register_loader(name: str, steps: StepCounter | None = None) -> Callable[[Loader], Loader]:
    """Register a loader; ``steps(spec)`` says how many steps its data has (default 1: static)."""
    return LOADERS.register(name, steps=steps)


def loaders() -> list[str]:
    return LOADERS.names()


def load_benchmark(spec: dict[str, Any]) -> Prepared:
    """Run the loader the spec names and return the benchmark in unified form."""
    result = LOADERS.get(spec.get("loader"))(spec)
    prepared = result if isinstance(result, Prepared) else Prepared(*result)
    if spec.get("errata"):
        prepared = with_errata(prepared, spec)
    return prepared


def with_errata(prepared: Prepared, spec: dict[str, Any]) -> Prepared:
    """Apply the overlay ``spec['errata']`` names (docs/data.md, "Errata overlays")."""
    overlay = load_overlay(overlay_path(spec["errata"]))
    if overlay.benchmark != spec.get("loader"):
        raise DataError(
            f"{spec['errata']}: an overlay for {overlay.benchmark!r}, "
            f"not for loader {spec.get('loader')!r}"
        )
    prepared.questions = apply_overlay(prepared.questions, prepared.sessions, overlay)
    prepared.errata = overlay
    counts = ", ".join(f"{n} {action}" for action, n in overlay.counts().items())
    prepared.notes.append(f"errata {overlay.name}: {counts} (in questions' meta.errata)")
    return prepared


def n_steps(spec: dict[str, Any]) -> int:
    """Number of steps of the step chain for this benchmark (1 for static benchmarks)."""
    name = spec.get("loader", "")
    counter = LOADERS.info(name).get("steps") if name in LOADERS else None
    return int(counter(spec)) if counter else 1
