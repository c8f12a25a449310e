"""The numbers the reference papers published, shipped as tidy CSV in ``data/published/``.

One row per published cell: which paper and which of its tables, on which data version and
benchmark, for which row (the system or model as the paper prints it), protocol, period, aggregate
and metric, the value, and the exact source it was transcribed from. ``mnemoflow compare`` pairs
these cells with a run's summary rows.

Columns (every file has exactly these, in this order; data/published/README.md has the how-to):

- ``paper``, ``table``: the paper (``amemgym``, ``locomo``) and the table's id inside it. A table
  id is ``<what>`` or ``<what>.<backbone>``: the backbone is the model every row of the table
  answered with, as the paper names it (``rag_qa.gpt-3.5-turbo``), or ``by-row`` when each row is
  its own model (named in ``model``); tables on different backbones are different tables.
  ``--published locomo/rag_qa.gpt-3.5-turbo`` selects one table, ``--published locomo`` a paper.
- ``version``: the data version the paper ran on (AMemGym ``v1.base``, LoCoMo ``locomo10``); the
  paper's own version (arXiv id and version, or ACL Anthology id) goes in ``source``.
- ``benchmark``: the benchmark family as mnemoflow names its loader (``amemgym``), or, for a
  table over several of a loader's sets, the presets' name of each set (MemoryBench ``mb_legal``):
  part of a cell's key, so one table may span several benchmarks.
- ``row``: the row label as printed (``AWE-(2,4,30)``, ``gpt-4.1-mini``, ``random``), made unique
  within its table by what the paper prints beside it (``gpt-3.5-turbo 16K``, ``Dialog top-5``).
- ``model``: the base model when the table states it, else empty.
- ``protocol``: mnemoflow's protocol name (``qa`` = static question answering over a history,
  ``interactive`` = AMemGym on-policy, ``interactive_replay`` = off-policy).
- ``period``: ``mean`` (the mean over periods, a run's last step) or a period / step number.
- ``aggregate``: over which questions: ``mean`` (all the table's questions: a static run's
  ``micro``, AMemGym's mean over periods) or ``type:<question_type>`` (one question type, named as
  mnemoflow's loader names it: the summary's ``type:<question_type>`` row it pairs with).
- ``metric``: mnemoflow's metric name (``memory_score``, ``accuracy``, ``f1``, ``j``,
  ``turn_evidence_recall``, ``retrieval_ms_p50``, ``<cause>_failure_rate``, ...; a metric
  mnemoflow does not compute keeps a plain id such as ``bleu1``) or ``rank_change`` (an integer:
  +k ranked k places higher).
- ``value``: in mnemoflow's units (``.296`` -> 0.296, 67.13 % -> 0.6713, 0.148 s -> 148 ms).
- ``source``: the paper's version and the exact table (or file, page, URL and the place in it).
- ``note``: the number as printed when the unit changed, and anything a reader must know.

A malformed file fails with one line naming the file, the line and the field, e.g.
``data/published/amemgym.csv: line 7: field 'value' must be a number, got '.2x6'``.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pandas as pd

from mnemoflow.data.validate import DataError

#: The folder of shipped published numbers (the repository's ``data/published``).
PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "data" / "published"

COLUMNS = (
    "paper",
    "table",
    "version",
    "benchmark",
    "row",
    "model",
    "protocol",
    "period",
    "aggregate",
    "metric",
    "value",
    "source",
    "note",
)
#: Columns that may be empty.
OPTIONAL = frozenset({"model", "note"})
#: One published cell, every column but what is said of it (the value, its source and note) and
#: the model: no two rows of the shipped files may share these.
CELL_KEY = tuple(name for name in COLUMNS if name not in ("model", "value", "source", "note"))
#: ``period`` for the mean over periods (compared with a run's last step); ``aggregate`` for all
#: the table's questions.
MEAN = "mean"
#: ``aggregate`` of one question type: ``type:<question_type>``, as in the score tables.
TYPE_PREFIX = "type:"
#: The metric whose value is a rank change (an integer), not a score.
RANK_CHANGE = "rank_change"

_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
#: A metric id may also hold ``@`` (``recall_all@5``, as the score tables name it).
_METRIC = re.compile(r"^[a-z0-9][a-z0-9_.@-]*$")


def _check_row(record: dict[str, str], where: str) -> dict[str, str | float]:
    for name in COLUMNS:
        value = record.get(name)
        if value is None:
            raise DataError(f"{where}: missing field '{name}'")
        if value != value.strip():
            raise DataError(f"{where}: field '{name}' has surrounding spaces: {value!r}")
        if not value and name not in OPTIONAL:
            raise DataError(f"{where}: field '{name}' is empty")
    for name in ("paper", "table", "benchmark", "protocol", "metric"):
        pattern, allowed = (_METRIC, "_ . - @") if name == "metric" else (_ID, "_ . -")
        if not pattern.match(record[name]):
            raise DataError(
                f"{where}: field '{name}' must be a lower-case id (a-z, 0-9, {allowed}), "
                f"got {record[name]!r}"
            )
    period = record["period"]
    if period != MEAN and not period.isdigit():
        raise DataError(f"{where}: field 'period' must be 'mean' or a number >= 0, got {period!r}")
    aggregate = record["aggregate"]
    if aggregate != MEAN and not (
        aggregate.startswith(TYPE_PREFIX) and _ID.match(aggregate.removeprefix(TYPE_PREFIX))
    ):
        raise DataError(
            f"{where}: field 'aggregate' must be 'mean' or 'type:<question_type>', "
            f"got {aggregate!r}"
        )
    try:
        value = float(record["value"])
    except ValueError:
        got = record["value"]
        raise DataError(f"{where}: field 'value' must be a number, got {got!r}") from None
    if not math.isfinite(value):
        raise DataError(f"{where}: field 'value' must be finite, got {record['value']!r}")
    if record["metric"] == RANK_CHANGE and not re.fullmatch(r"[+-]?\d+", record["value"]):
        raise DataError(
            f"{where}: field 'value' of a {RANK_CHANGE} must be an integer, got {record['value']!r}"
        )
    return {**{name: record[name] for name in COLUMNS}, "value": value}


def read_published(path: str | Path) -> pd.DataFrame:
    """One published-numbers CSV, checked row by row (file, line and field in every error)."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}: line 1: empty file, expected the header row") from None
        if tuple(header) != COLUMNS:
            missing = [c for c in COLUMNS if c not in header]
            extra = [c for c in header if c not in COLUMNS]
            raise DataError(
                f"{path}: line 1: header must be {','.join(COLUMNS)} "
                f"(missing {missing}, extra {extra}, or out of order)"
            )
        rows = []
        for record in reader:
            where = f"{path}: line {reader.line_num}"
            if not record:
                raise DataError(f"{where}: empty line")
            if len(record) != len(COLUMNS):
                raise DataError(f"{where}: {len(record)} fields, expected {len(COLUMNS)}")
            rows.append(_check_row(dict(zip(COLUMNS, record, strict=True)), where))
            rows[-1]["line"] = reader.line_num
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "line"])
    frame.insert(len(frame.columns), "file", str(path))
    return frame


def load_published(paths: str | Path | list | None = None) -> pd.DataFrame:
    """Every row of the given CSV files (or of every ``*.csv`` in a folder; default: the shipped
    ``data/published``), with ``file`` and ``line`` columns saying where each row came from.
    A cell given twice is an error naming both lines."""
    if paths is None:
        paths = PUBLISHED_DIR
    if isinstance(paths, str | Path):
        paths = sorted(Path(paths).glob("*.csv")) if Path(paths).is_dir() else [Path(paths)]
    frames = [read_published(p) for p in paths]
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, "line", "file"])
    frame = pd.concat(frames, ignore_index=True)
    seen: dict[tuple, str] = {}
    for row in frame.to_dict("records"):
        key = tuple(row[k] for k in CELL_KEY)
        here = f"{row['file']}: line {row['line']}"
        if key in seen:
            raise DataError(
                f"{here}: cell {dict(zip(CELL_KEY, key, strict=True))} already given at {seen[key]}"
            )
        seen[key] = here
    return frame


def select_published(frame: pd.DataFrame, spec: str) -> pd.DataFrame:
    """The rows of ``PAPER`` or ``PAPER/TABLE`` (comma-separated for several); an unknown paper
    or table is a one-line error naming the known ones."""
    keep = pd.Series(False, index=frame.index)
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        paper, _, table = part.partition("/")
        hit = frame["paper"] == paper
        if not hit.any():
            known = ", ".join(sorted(frame["paper"].unique()))
            raise DataError(f"published: no paper {paper!r} (known: {known})")
        if table:
            tables = sorted(frame.loc[hit, "table"].unique())
            hit &= frame["table"] == table
            if not hit.any():
                known = "known: " + ", ".join(tables)
                raise DataError(f"published: paper {paper!r} has no table {table!r} ({known})")
        keep |= hit
    return frame[keep].reset_index(drop=True)
