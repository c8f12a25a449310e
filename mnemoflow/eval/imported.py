"""The answers of a system run outside mnemoflow, read from its published per-question output.

A ``systems:`` entry ``{type: imported, format, path, sha256}`` (written by ``mnemoflow
import``) answers in the static QA answer job from this file instead of asking the agent; the
workflow then judges it with the configured judge like any run, so a published system's answers
and one's own are held under one judge. The formats are those ``mnemoflow export`` writes
(:mod:`mnemoflow.eval.export`) and the published outputs they come from:

- ``longmemeval``: ``{question_id, hypothesis}`` per line (``hypotheses.jsonl``; the official
  eval log, which adds ``autoeval_label``, reads the same), with an optional retrieval log
  (``retrievals: {path, sha256}``) read as the memory's ranking;
- ``locomo``: LoCoMo's samples JSON with ``<key>_prediction`` (and ``<key>_prediction_context``,
  read as the ranking) beside each question; or the Mem0 evaluation's ``results.json`` (an object
  keyed by conversation index, each a list of ``{question, answer, response, category, ...}``),
  which carries no question ids: the k-th conversation is the benchmark's k-th sample, and each
  record is the first not yet taken question of that sample with the same text;
- ``memorybench``: ``{dataset, test_idx, response}`` per line.

A question of the benchmark the file does not answer keeps an empty answer and is reported as
failed, so the judge leaves it unscored (``<metric>:unscored``) rather than counting it wrong.
An AMemGym eval-output (``amemgym``) answers the interactive protocol instead: its dialogues job
reads the file's per-period replies (:mod:`mnemoflow.eval.imported_amemgym`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.errata import file_sha256
from mnemoflow.errors import ConfigError
from mnemoflow.eval import imported_amemgym
from mnemoflow.eval.export import is_locomo_samples, read_json, read_locomo_samples
from mnemoflow.eval.memorybench import memorybench_rescore
from mnemoflow.eval.static_qa.rescore import (
    answers_from_predictions,
    prediction_records,
    read_predictions,
    read_retrievals,
)

IMPORTED = "imported"
AMEMGYM = imported_amemgym.FORMAT
#: Formats the static QA answer job reads (AMemGym's eval-output is not one of them).
STATIC_FORMATS = ("longmemeval", "locomo", "memorybench")
#: The protocols a format's imported system runs under (every other runs it as an empty memory).
PROTOCOLS_OF = {**{f: ("qa",) for f in STATIC_FORMATS}, AMEMGYM: ("interactive",)}


def checked_file(path: Any, sha256: Any, where: str) -> Path:
    """``path`` when it exists and has ``sha256``; else one line naming ``where`` and the file."""
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}: missing field 'path'")
    if not Path(path).is_file():
        raise ConfigError(f"{where}.path: no such file {path}")
    actual = file_sha256(path)
    if sha256 != actual:
        raise ConfigError(f"{where}.sha256: {path} has sha256 {actual}, the config says {sha256}")
    return Path(path)


@dataclass
class Imported:
    """question_id -> the published answer, and -> its ranked context ids where the file has one."""

    responses: dict[str, str]
    rankings: dict[str, list[str]] = field(default_factory=dict)
    #: the published judge's own verdict (0/1) where the file keeps one: a LongMemEval eval
    #: log's ``autoeval_label``, a Mem0 evaluation file's ``llm_score``
    verdicts: dict[str, float] = field(default_factory=dict)


def read_imported(spec: dict[str, Any], questions: pd.DataFrame, where: str) -> Imported:
    """The answers of an ``imported`` system's file for the benchmark's ``questions`` (every
    question of the prepared table, in the loader's order); one-line errors naming file, record
    and field."""
    fmt = spec.get("format")
    if fmt not in STATIC_FORMATS:
        raise ConfigError(
            f"{where}.format: static QA reads {list(STATIC_FORMATS)}, got {fmt!r}"
            + (" (an AMemGym eval-output answers the interactive protocol)" if fmt else "")
        )
    path = checked_file(spec.get("path"), spec.get("sha256"), where)
    known = set(questions["question_id"])
    if fmt == "longmemeval":
        frame = read_predictions(path, known)
        rankings = {}
        if spec.get("retrievals"):
            log = spec["retrievals"]
            log_path = checked_file(log.get("path"), log.get("sha256"), f"{where}.retrievals")
            rankings = read_retrievals(log_path, known)
        responses = dict(zip(frame["question_id"], frame["hypothesis"], strict=True))
        return Imported(responses, rankings, eval_log_labels(path))
    if fmt == "memorybench":
        datasets = sorted(set(questions["dataset"]))
        joined = memorybench_rescore.read_predictions(path, questions, datasets, None)
        return Imported(dict(zip(joined["question_id"], joined["response"], strict=True)))
    if is_locomo_samples(path):
        frame, rankings = read_locomo_samples(path, known, spec.get("key"))
        return Imported(dict(zip(frame["question_id"], frame["hypothesis"], strict=True)), rankings)
    records = read_mem0_results(path, questions)
    verdicts = {q: float(r["llm_score"]) for q, r in records.items() if "llm_score" in r}
    return Imported({q: r["response"] for q, r in records.items()}, {}, verdicts)


def eval_log_labels(path: Path) -> dict[str, float]:
    """question_id -> the official judge's label (1.0 / 0.0) of a LongMemEval eval log's
    ``autoeval_label`` (``{model, label}``); empty for a plain hypotheses file."""
    labels = {}
    for where, record in prediction_records(path):
        if not isinstance(record, dict) or "autoeval_label" not in record:
            continue
        label = record["autoeval_label"]
        label = label.get("label") if isinstance(label, dict) else label
        if not isinstance(label, bool):
            raise ConfigError(f"{where}: 'autoeval_label.label' must be true/false")
        labels[str(record["question_id"])] = float(label)
    return labels


def mem0_records(path: Path) -> dict[int, list[dict[str, Any]]]:
    """conversation index -> its records, of the Mem0 evaluation's results JSON (or of its
    evaluation metrics, which add ``llm_score``), each with text ``question`` and ``response`` and
    ``llm_score`` 0 or 1 where it has one; read without the benchmark, one-line errors naming file,
    conversation, record and field."""
    content = read_json(path)
    if not isinstance(content, dict) or not content:
        raise ConfigError(
            f"{path}: expected LoCoMo samples or an object keyed by conversation index"
        )
    out = {}
    for conversation, records in content.items():
        where = f"{path}: conversation {conversation}"
        if not str(conversation).isdigit():
            raise ConfigError(f"{where}: not a conversation index (0, 1, ...)")
        if not isinstance(records, list):
            raise ConfigError(f"{where}: expected a list of records")
        for i, record in enumerate(records):
            loc = f"{where} record {i}"
            if not isinstance(record, dict):
                raise ConfigError(f"{loc}: expected an object")
            for name in ("question", "response"):
                if not isinstance(record.get(name), str):
                    raise ConfigError(f"{loc}: missing or non-text field '{name}'")
            score = record.get("llm_score", 0)
            if isinstance(score, bool) or score not in (0, 1):
                raise ConfigError(f"{loc}: field 'llm_score' must be 0 or 1, got {score!r:.40}")
        out[int(conversation)] = records
    return out


def read_mem0_results(path: Path, questions: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """question_id -> record of the Mem0 evaluation's results JSON (:func:`mem0_records`), mapped
    by conversation index (the k-th episode of ``questions``), then by question text in QA
    order."""
    episodes = list(dict.fromkeys(questions["episode_id"]))
    out: dict[str, str] = {}
    for conversation, records in mem0_records(path).items():
        where = f"{path}: conversation {conversation}"
        if conversation >= len(episodes):
            raise ConfigError(
                f"{where}: not a conversation index of the benchmark (0..{len(episodes) - 1})"
            )
        episode = episodes[conversation]
        open_ids: dict[str, list[str]] = defaultdict(list)
        mine = questions[questions["episode_id"] == episode]
        for qid, text in zip(mine["question_id"], mine["question"], strict=True):
            open_ids[text.strip()].append(qid)
        for i, record in enumerate(records):
            candidates = open_ids.get(record["question"].strip())
            if not candidates:
                raise ConfigError(
                    f"{where} record {i}: field 'question' {record['question']!r:.80} matches no "
                    f"unanswered question of sample {episode}"
                )
            out[candidates.pop(0)] = record
    return out


def imported_answers(
    questions: pd.DataFrame, todo: pd.DataFrame, spec: dict[str, Any], keys: dict[str, Any],
    where: str,
) -> tuple[pd.DataFrame, dict[str, str]]:  # fmt: skip
    """(the ANSWERS rows of the ``todo`` questions read from an imported system's file, the
    questions it does not answer -> why). ``questions``: the benchmark's whole prepared table,
    which the file is checked against."""
    imported = read_imported(spec, questions, where)
    missing = sorted(set(todo["question_id"]) - set(imported.responses))
    predictions = pd.DataFrame(
        {
            "question_id": list(todo["question_id"]),
            "hypothesis": [imported.responses.get(q, "") for q in todo["question_id"]],
        }
    )
    frame = answers_from_predictions(
        keys["benchmark"], questions, predictions, imported.rankings, keys["system"]
    )
    frame["protocol"], frame["step"] = keys["protocol"], keys["step"]
    frame["model"] = f"{IMPORTED}:{spec['format']}"
    frame = frame.sort_values("question_id", kind="stable").reset_index(drop=True)
    failures = {q: f"not answered in {spec['path']}" for q in missing}
    return frame, failures


def check_output(fmt: str, path: Path, key: str | None = None) -> int:
    """How many answers an output file of ``fmt`` holds, read without the benchmark's data (the
    question ids are checked against it when the answer job reads the file); one-line errors."""
    if fmt == AMEMGYM:
        return len(imported_amemgym.read_output(path).replies)
    if fmt == "longmemeval":
        return len(read_predictions(path))
    if fmt == "memorybench":
        records = [r for _, r in memorybench_rescore.read_records(path) if isinstance(r, dict)]
        names = sorted({r["dataset"] for r in records if isinstance(r.get("dataset"), str)})
        keyed = memorybench_rescore.keyed_records(path, "response", names)
        return len(memorybench_rescore.text_responses(path, keyed))
    if is_locomo_samples(path):
        return len(read_locomo_samples(path, None, key)[0])
    return sum(len(records) for records in mem0_records(path).values())


def file_verdicts(fmt: str, path: Path) -> list[float]:
    """The published judge's verdicts a checked output file keeps (a LongMemEval eval log's
    labels, a Mem0 evaluation file's ``llm_score``), in file order; empty when it keeps none."""
    if fmt == "longmemeval":
        return list(eval_log_labels(path).values())
    if fmt != "locomo" or is_locomo_samples(path):
        return []
    records = mem0_records(path).values()
    return [float(r["llm_score"]) for rs in records for r in rs if "llm_score" in r]


def system_entry(
    fmt: str, path: Path, key: str | None = None, retrievals: Path | None = None
) -> dict[str, Any]:
    """The ``systems:`` entry of an imported output: its format, file and the file's sha256."""
    entry: dict[str, Any] = {"type": IMPORTED, "format": fmt, "path": str(path)}
    entry["sha256"] = imported_amemgym.output_sha256(path) if fmt == AMEMGYM else file_sha256(path)
    if key:
        entry["key"] = key
    if retrievals is not None:
        entry["retrievals"] = {"path": str(retrievals), "sha256": file_sha256(retrievals)}
    return entry


def check_imported(
    systems: dict[str, dict[str, Any]], names: list[str], protocols: list[str], where: str
) -> None:
    """At startup, the imported ``names`` among a benchmark's systems: a known format, run under
    its protocol only (static QA, or AMemGym's ``interactive``; another protocol would run it as
    a memory that holds nothing), the file there with its sha256; one line naming ``where``
    (``config benchmarks.NAME``) or the system."""
    for name in names:
        spec = systems.get(name) or {}
        if spec.get("type") != IMPORTED:
            continue
        system = f"config systems.{name}"
        fmt = spec.get("format")
        if fmt not in PROTOCOLS_OF:
            raise ConfigError(f"{system}.format: one of {list(PROTOCOLS_OF)}, got {fmt!r}")
        others = sorted(set(protocols) - set(PROTOCOLS_OF[fmt]))
        if others:
            kind = "static QA" if fmt in STATIC_FORMATS else "the interactive protocol"
            raise ConfigError(
                f"{where}: system {name!r} is imported (its answers are read from a file) and "
                f"its {fmt} output answers {kind} only, not {others}"
            )
        if fmt == AMEMGYM:
            imported_amemgym.checked_output(spec.get("path"), spec.get("sha256"), system)
        else:
            checked_file(spec.get("path"), spec.get("sha256"), system)
