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
from mnemoflow.errors import ConfigError
from mnemoflow.registry import Registry


@dataclass(frozen=True)
class Tally:
    """How many records of the data one of a loader's documented rules dropped or kept (the
    rules of every loader: docs/data.md, "What each loader refuses, drops and keeps"); written
    to ``prepared/notes.txt`` and ``data_version.json``, shown in summary.md and the report."""

    count: int
    #: what was counted, plural ("evidence ids naming no turn")
    what: str
    #: ``dropped`` | ``kept`` | ``normalized``
    action: str
    #: the rule, for people
    rule: str = ""
    #: ``question`` when the records are questions (a dropped one leaves every denominator)
    unit: str = ""

    def line(self) -> str:
        return f"{self.count} {self.what}: {self.action}" + (f" ({self.rule})" if self.rule else "")


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
    #: The loader's documented rules and how many records each dropped or kept (:class:`Tally`).
    tallies: list[Tally] = field(default_factory=list)
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


#: ``check(spec, where)``: what a loader can check when the workflow starts, before any job (its
#: source present or an allowed pinned download, its parameters' types); raises a one-line
#: ConfigError or DataError, ``where`` being ``config benchmarks.NAME``.
Checker = Callable[[dict[str, Any], str], None]


def register_loader(
    name: str, steps: StepCounter | None = None, check: Checker | None = None
) -> Callable[[Loader], Loader]:
    """Register a loader; ``steps(spec)`` says how many steps its data has (default 1: static),
    ``check`` what is checked at startup (:func:`check_benchmarks`)."""
    return LOADERS.register(name, steps=steps, check=check)


def check_benchmarks(benchmarks: dict[str, Any], names: list[str]) -> None:
    """The startup check of the run's benchmarks ``names``: the loader is known, and its own
    ``check`` passes (source, parameters); one line naming ``config benchmarks.NAME``. Every
    benchmark is checked: the data several of them miss is named in the same line (benchmarks
    missing the same, once), so that one placement round makes the run start."""
    failed: dict[str, list[str]] = {}  # message -> the benchmarks that failed with it
    for name in names:
        spec = benchmarks[name]
        where = f"config benchmarks.{name}"
        try:
            check = LOADERS.info(spec.get("loader")).get("check")
        except ConfigError as exc:
            raise ConfigError(f"{where}.loader: {exc}") from None
        if check is None:
            continue
        try:
            check(spec, where)
        except DataError as exc:
            failed.setdefault(str(exc), []).append(name)
    if failed:
        raise ConfigError(
            " | ".join(
                f"config {', '.join(f'benchmarks.{n}' for n in group)}: {message}"
                for message, group in failed.items()
            )
        )


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


def records_note(prepared: Prepared) -> dict[str, Any]:
    """What ``data_version.json`` and ``notes.txt`` say of the records: the questions kept, those
    the loader's rules dropped, and one line per rule (summary.md's denominators)."""
    dropped = sum(
        t.count for t in prepared.tallies if t.unit == "question" and t.action == "dropped"
    )
    return {
        "questions": len(prepared.questions),
        "questions_dropped": dropped,
        "rules": [t.line() for t in prepared.tallies],
    }


def notes_text(prepared: Prepared) -> str:
    """``prepared/notes.txt``: the questions kept and dropped, one line per loader rule with its
    count, then every record the loader repaired or skipped."""
    records = records_note(prepared)
    head = (
        f"{records['questions']} questions kept, {records['questions_dropped']} dropped by the "
        "loader's rules (docs/data.md)"
    )
    return "\n".join([head, *records["rules"], *prepared.notes]) + "\n"


def n_steps(spec: dict[str, Any]) -> int:
    """Number of steps of the step chain for this benchmark (1 for static benchmarks)."""
    name = spec.get("loader", "")
    counter = LOADERS.info(name).get("steps") if name in LOADERS else None
    return int(counter(spec)) if counter else 1
