"""The unified tables every stage reads and writes, with their pyarrow schemas.

One module owns every schema so that a loader, a protocol and a report agree on column names and
types. Every Parquet write goes through :func:`write_table`, which validates the frame against its
schema and writes atomically (temporary file, synced to disk, then rename), so that a failed job
or a crashed machine never leaves a file that looks finished.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mnemoflow.layout import QUARANTINE

_str = pa.string()
_int = pa.int64()
_float = pa.float64()
_bool = pa.bool_()
_strlist = pa.list_(pa.string())

#: Keys that identify one run of a protocol: which data, which memory, which protocol, which step.
RUN_KEYS: list[tuple[str, pa.DataType]] = [
    ("benchmark", _str),
    ("system", _str),
    ("protocol", _str),
    ("step", _int),
]

SESSIONS = pa.schema(
    [
        ("benchmark", _str),
        (
            "episode_id",
            _str,
        ),  # one memory is built per episode (a user, a conversation, a haystack)
        ("session_id", _str),
        ("session_index", _int),  # order of the session inside its episode
        ("session_time", _str),  # ISO 8601 when known, else the benchmark's own string
        ("step", _int),  # the step (period) whose ingest adds this session; 0 for static data
        ("turn_id", _str),
        ("turn_index", _int),
        ("role", _str),  # "user" | "assistant"
        ("speaker", _str),
        ("content", _str),
        ("has_evidence", _bool),
    ]
)

#: Which sessions make up each episode's history, in order. Benchmarks whose episodes share sessions
#: (LongMemEval: every question has its own haystack drawn from one pool) store each distinct
#: session once in ``sessions`` (with ``episode_id`` = "") and list the episodes here.
EPISODE_SESSIONS = pa.schema(
    [
        ("benchmark", _str),
        ("episode_id", _str),
        ("session_id", _str),
        ("session_index", _int),
        ("session_time", _str),
        ("step", _int),
    ]
)

QUESTIONS = pa.schema(
    [
        ("benchmark", _str),
        ("dataset", _str),
        ("episode_id", _str),
        ("question_id", _str),
        ("split", _str),
        ("question", _str),
        ("answer", _str),
        ("question_type", _str),
        ("question_time", _str),
        ("options", _strlist),
        ("gold_option", _int),  # index into options; -1 when the question is free text
        ("evidence_ids", _strlist),  # turn ids (or session ids) that hold the answer
        ("checkpoint", _int),  # the step after which the question is asked
        ("lang", _str),
        ("meta", _str),  # JSON object with benchmark-specific fields
    ]
)

#: Conversations that feed memory: training dialogues with user feedback (MemoryBench) and
#: sessions the agent had with a simulated user (AMemGym). Round r is the user message r and the
#: assistant's answer to it; a user turn's ``implicit_action`` / ``terminated`` are the user's
#: reaction to the previous answer (like | dislike | copy | none; "" when there is none).
DIALOGUES = pa.schema(
    [
        *RUN_KEYS,
        ("episode_id", _str),
        ("dialogue_id", _str),  # a training item or a session
        ("round", _int),
        ("role", _str),  # "user" | "assistant"
        ("content", _str),
        ("implicit_action", _str),
        ("terminated", _bool),
        ("source", _str),  # "data" | "generated" | "replayed"
    ]
)

ANSWERS = pa.schema(
    [
        *RUN_KEYS,
        ("episode_id", _str),
        ("question_id", _str),
        ("question_type", _str),
        ("response", _str),
        ("retrieved_ids", _strlist),  # source turn ids of the memory items shown to the reader
        ("ranked_ids", _strlist),  # the memory's ranking (retrieval metrics are computed on it)
        ("context_tokens", _int),
        ("model", _str),
        ("cache_hit", _bool),
        ("tokens_in", _int),
        ("tokens_out", _int),
        ("latency_s", _float),
        # wall time of the memory's retrieve; the episode's first, which opens the loaded memory,
        # in retrieval_cold_s instead (both null: a retrieval log gave the ranking)
        ("retrieval_s", _float),
        ("retrieval_cold_s", _float),
    ]
)

JUDGEMENTS = pa.schema(
    [
        *RUN_KEYS,
        ("question_id", _str),
        ("question_type", _str),
        ("judge", _str),  # judge model and prompt version, e.g. "offline-heuristic/qa-v1"
        ("metric", _str),
        ("value", _float),
        ("raw_reply", _str),  # verbatim (a thinking block stripped); re-asks: a JSON list
        ("parse_ok", _bool),  # false: no verdict after the re-asks; value is then NaN
        # the reference's own reading of the reply where it parses differently (LongMemEval: any
        # "yes" in the lower-cased reply); NaN where there is none
        ("value_reference", _float),
    ]
)

#: A judge panel's verdicts (eval.static_qa.panel): the judgements schema plus the panel judge's
#: name.
PANEL_JUDGEMENTS = pa.schema([*JUDGEMENTS, ("panel_judge", _str)])

#: ``panel_judge`` of the configured judge (``models.judge`` with the benchmark's judge kind) in
#: the probe's verdicts and the report's panel tables.
CONFIGURED_JUDGE = "configured"
#: Judgement metrics that are not a judge's verdict (LoCoMo's official F1, repeat agreement).
NOT_VERDICTS = ("f1", "judge_agreement")

#: The false-positive probe's verdicts (eval.static_qa.probes, eval.static_qa.panel): wrong answers
#: built from the gold (``probe``: swapped | vague | abstention; ``detail``: what was swapped for
#: what), each judged like an answer by every judge of the panel and the configured one
#: (``panel_judge``).
PROBE_JUDGEMENTS = pa.schema(
    [
        *JUDGEMENTS,
        ("probe", _str),
        ("detail", _str),
        ("response", _str),
        ("panel_judge", _str),
    ]
)

#: Score rows that time the run (eval.static_qa.footprint): wall clock on the machine that ran it,
#: so they are shown beside the results but never compared or ranked as results.
TIMED_METRICS = ("retrieval_ms_p50", "retrieval_ms_p95", "retrieval_ms_cold")
#: A memory's footprint (eval.static_qa.footprint): the timed rows and the snapshot's size.
FOOTPRINT_METRICS = (*TIMED_METRICS, "memory_kb")

SCORES = pa.schema(
    [
        *RUN_KEYS,
        ("metric", _str),  # e.g. "accuracy"
        ("aggregate", _str),  # "micro" | "macro" | "type:<question_type>"
        ("value", _float),
        ("n", _int),  # number of questions behind the value
    ]
)

#: The summary is the union of every run's scores.
SUMMARY = SCORES

#: Per-question values in long form, the rows every aggregate score is computed from: judged
#: metrics (``level`` "answer") and retrieval metrics (``level`` "session" or "turn").
QUESTION_SCORES = pa.schema(
    [
        *RUN_KEYS,
        ("question_id", _str),
        ("question_type", _str),
        ("metric", _str),
        ("value", _float),
        ("level", _str),  # answer | session | turn
    ]
)

#: Why questions were missed (AMemGym's write / read / utilization diagnosis), per run and question
#: type. ``rate`` is the share of the ``n`` questions of that group with that outcome; outcomes are
#: exclusive (a wrong answer's cause is the first stage that lost the fact), so the rates of a
#: group add up to 1. ``question_type`` "all" is the whole question set.
#: The memory failures of the DIAGNOSIS table (AMemGym's diagnosis, and static QA's from the
#: evidence): a wrong answer whose information was never written, written but not retrieved, or
#: retrieved but not used.
MEMORY_FAILURES = ("write", "read", "utilization")
DIAGNOSIS = pa.schema(
    [
        ("benchmark", _str),
        ("system", _str),
        ("step", _int),
        ("question_type", _str),
        ("failure", _str),  # correct|write|read|utilization|undiagnosable|unjudged
        ("rate", _float),
        ("n", _int),
    ]
)

#: AMemGym checkpoint answers scored (mnemoflow.eval.amemgym.amemgym_score): one row per (user,
#: period, question); option indices in data.json order; recall / upper-bound columns null when not
#: given.
AMEMGYM_QUESTION_SCORES = pa.schema(
    [
        ("user_id", _str),
        ("period", _int),
        ("question_index", _int),
        ("question_id", _str),
        ("n_options", _int),
        ("chosen_option", _int),  # null: the reply did not parse (scored wrong)
        ("gold_option", _int),
        ("correct", _float),
        ("parse_ok", _bool),
        ("random", _float),
        ("upper_bound", _float),
        ("upper_parse_ok", _bool),
        ("recall_correct", _float),
        ("recall_parse_ok", _bool),
        ("write_failure", _float),
        ("read_failure", _float),
        ("utilization_failure", _float),
        ("failure", _str),  # none | write | read | write+read | utilization
    ]
)

#: AMemGym scores per period; ``period`` null = the mean row over all periods.
AMEMGYM_SCORES = pa.schema([("period", _int), ("metric", _str), ("value", _float), ("n", _int)])

#: AMemGym environment generation (mnemoflow/environment): one row per user and stage run.
GENERATION_REPORT = pa.schema(
    [
        ("benchmark", _str),
        ("user", _int),  # the persona's index 0..N-1 (the job's wildcard)
        ("persona", _str),  # the persona's key
        ("stage", _str),
        ("calls", _int),  # model replies received, re-asks included
        ("asks", _int),
        ("validation_failures", _int),
        ("refinements", _int),
        ("reused", _bool),  # taken from the stage checkpoint: no model call
        ("failed", _bool),
        ("reason", _str),  # why the stage failed ("" if it did not)
    ]
)

#: MemoryBench scored outside the workflow (``mnemoflow score --benchmark memorybench``): one row
#: per item and metric (its question_scores.parquet).
MEMORYBENCH_ITEM_SCORES = pa.schema(
    [
        ("dataset", _str),
        ("test_idx", _int),
        ("metric", _str),
        ("value", _float),
        ("question_id", _str),
        ("parse_ok", _bool),
        ("raw_reply", _str),
        ("primary", _bool),
        ("prompt_version", _str),
    ]
)

#: A MemoryBench set's normalized scores (``mnemoflow normalize``, its scores.parquet): summary
#: rows (``dataset`` "all": average, weighted_average, z_score) then per dataset rows (mean = raw
#: mean, minmax, z = mean normalized values).
MEMORYBENCH_NORMALIZED = pa.schema(
    [("set", _str), ("dataset", _str), ("metric", _str), ("value", _float), ("n", _int)]
)

SCHEMAS: dict[str, pa.Schema] = {
    "sessions": SESSIONS,
    "episode_sessions": EPISODE_SESSIONS,
    "questions": QUESTIONS,
    "dialogues": DIALOGUES,
    "answers": ANSWERS,
    "judgements": JUDGEMENTS,
    "panel_judgements": PANEL_JUDGEMENTS,
    "probe_judgements": PROBE_JUDGEMENTS,
    "scores": SCORES,
    "summary": SUMMARY,
    "question_scores": QUESTION_SCORES,
    "amemgym_question_scores": AMEMGYM_QUESTION_SCORES,
    "amemgym_scores": AMEMGYM_SCORES,
    "diagnosis": DIAGNOSIS,
    "generation_report": GENERATION_REPORT,
}


class TableError(ValueError):
    """A table does not match its schema; the message names the file and column."""


def to_arrow(frame: pd.DataFrame, schema: pa.Schema, where: str = "<table>") -> pa.Table:
    """Convert ``frame`` to ``schema`` exactly: same columns, castable types, no nulls in keys."""
    missing = [name for name in schema.names if name not in frame.columns]
    extra = [name for name in frame.columns if name not in schema.names]
    if missing or extra:
        raise TableError(f"{where}: columns do not match schema (missing {missing}, extra {extra})")
    columns = []
    for field in schema:
        try:
            columns.append(pa.array(frame[field.name].tolist(), type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise TableError(f"{where}: column '{field.name}' is not {field.type}: {exc}") from exc
        if columns[-1].null_count and field.name in _NON_NULL:
            raise TableError(f"{where}: column '{field.name}' has {columns[-1].null_count} nulls")
    return pa.Table.from_arrays(columns, schema=schema)


_NON_NULL = {"benchmark", "episode_id", "session_id", "turn_id", "question_id", "metric", "system"}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publish(tmp: str, path: Path) -> None:
    """Give the synced temporary file normal permissions (mkstemp makes it 0600), rename it, and
    sync the directory so the rename survives a crash too. Without the syncs a machine crash can
    publish the name before the bytes: a finished-looking file that is empty or partly zero."""
    with suppress(OSError):
        os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
    with suppress(OSError):  # some file systems cannot sync a directory; the rename still holds
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


@contextmanager
def _atomic_file(path: Path, binary: bool) -> Iterator[IO]:
    """A temporary file beside ``path`` to write into: synced and published as ``path`` when the
    block ends, removed when it raises, so a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Columns added to a schema after tables were written without them: a table that lacks exactly
#: these trailing columns is read with them null (``judgements`` of runs made before
#: ``value_reference`` existed), so older results stay readable; a frame written without them
#: gets them null too.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"judgements": ("value_reference",)}


def _added(schema: pa.Schema) -> tuple[str, ...]:
    return next((c for n, c in ADDED_COLUMNS.items() if SCHEMAS[n] is schema), ())


def matches_schema(names: list[str], schema: pa.Schema) -> bool:
    """Whether a table with these columns reads as ``schema`` (an older one may lack only its
    :data:`ADDED_COLUMNS`, read as nulls)."""
    return names == schema.names or names + list(_added(schema)) == schema.names


def write_table(frame: pd.DataFrame, path: str | os.PathLike, schema: pa.Schema | str) -> Path:
    """Validate ``frame`` against ``schema`` and write it to ``path`` atomically."""
    if isinstance(schema, str):
        schema = SCHEMAS[schema]
    path = Path(path)
    missing = [c for c in _added(schema) if c not in frame.columns]
    if missing:  # a writer that predates the column: null, as an old table reads
        frame = frame.assign(**{c: None for c in missing})
    table = to_arrow(frame, schema, where=str(path))
    with _atomic_file(path, binary=True) as handle:
        pq.write_table(table, handle)
    return path


def read_table(
    path: str | os.PathLike,
    schema: pa.Schema | str | None = None,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """Read a Parquet table; with ``schema``, check that its columns are the schema's (an older
    table that lacks only the schema's :data:`ADDED_COLUMNS` gets them as nulls).

    A file that is not a whole Parquet table (truncated, damaged) is a :class:`TableError` in one
    line naming it, never a pyarrow traceback: the next run moves it to ``results/quarantine/``
    and makes it again (:mod:`mnemoflow.data.integrity`). ``columns``: read only those.
    """
    if isinstance(schema, str):
        schema = SCHEMAS[schema]
    try:
        table = pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise TableError(
            f"{path}: not a readable Parquet table ({reason}); the next run moves it to "
            f"{QUARANTINE}/ and makes it again"
        ) from None
    if schema is not None and columns is None and table.schema.names != schema.names:
        if not matches_schema(table.schema.names, schema):
            raise TableError(f"{path}: columns {table.schema.names} are not {schema.names}")
        for name in _added(schema):
            field = schema.field(name)
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.to_pandas()


def empty(schema: pa.Schema | str) -> pd.DataFrame:
    """An empty frame with the schema's columns (for jobs that legitimately produce no rows)."""
    if isinstance(schema, str):
        schema = SCHEMAS[schema]
    return schema.empty_table().to_pandas()


def write_atomic_text(path: str | os.PathLike, text: str) -> Path:
    """Write a small text file (JSON ledger, Markdown table) atomically."""
    path = Path(path)
    with _atomic_file(path, binary=False) as handle:
        handle.write(text)
    return path


def as_list(value: object) -> list:
    """A list column's value as a list: Parquet gives arrays, fixtures give lists, nulls give []."""
    if value is None:
        return []
    if isinstance(value, float) and value != value:  # NaN from a missing cell
        return []
    return list(value)  # type: ignore[call-overload]
