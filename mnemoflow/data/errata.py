"""Errata overlays: published corrections of a benchmark's gold, applied on top of its file.

A benchmark entry may name one overlay (``errata: data/errata/locomo-audit.yaml``). The overlay
says, per question, what a published audit found: ``correct`` (a new gold answer, and new evidence
turns where the audit gives them), ``drop`` (the question has no single answer, or its premise is
wrong) or ``evidence`` (the answer stands, the evidence turns change). Every entry names its
question twice, by ``question_id`` and by the exact question text, so an overlay written for
another version of the file fails instead of correcting the wrong question.

Applying an overlay does not change what the run answers or how the workflow scores it: the
questions table keeps the gold as released (the version papers report on), and each affected
question carries its erratum in ``meta.errata``. ``mnemoflow compare`` then scores the same run on
both versions (:mod:`mnemoflow.eval.static_qa.data_versions`). The prepared folder's
``data_version.json`` (:func:`data_version`) records the source file's checksum and the overlay's
name, checksum and counts, so every result can be traced to the data it was scored on.

Format (YAML)::

    name: locomo-audit
    benchmark: locomo
    applies_to: {file: locomo10.json, sha256: <sha256 of the file the entries were checked on>}
    source: {title: ..., url: ..., commit: ..., licence: ...}
    entries:
      - {question_id: conv-26_q5, question: "When did Melanie run a charity race?",
         action: correct, answer: "The Saturday before 25 May 2023", reason: temporal_error,
         ref: locomo_0_qa5}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mnemoflow.data.validate import DataError

ACTIONS = ("correct", "drop", "evidence")
#: The overlays the project ships; ``errata: NAME`` (no ``.yaml``, no folder) names one of them.
ERRATA_DIR = Path(__file__).resolve().parents[2] / "data" / "errata"
_TOP_KEYS = {"name", "benchmark", "applies_to", "source", "entries"}
_ENTRY_KEYS = {"question_id", "question", "action", "answer", "evidence", "reason", "ref"}


@dataclass(frozen=True)
class Erratum:
    question_id: str
    question: str
    action: str
    reason: str
    answer: str | None = None
    evidence: tuple[str, ...] | None = None
    ref: str = ""

    def as_meta(self, overlay: str) -> dict[str, Any]:
        """What ``meta.errata`` of the question holds."""
        meta: dict[str, Any] = {"overlay": overlay, "action": self.action, "reason": self.reason}
        if self.answer is not None:
            meta["answer"] = self.answer
        if self.evidence is not None:
            meta["evidence"] = list(self.evidence)
        if self.ref:
            meta["ref"] = self.ref
        return meta


@dataclass(frozen=True)
class Overlay:
    name: str
    benchmark: str
    path: str
    sha256: str
    source: dict[str, Any]
    applies_to: dict[str, Any]
    entries: tuple[Erratum, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        return {action: sum(e.action == action for e in self.entries) for action in ACTIONS}


def overlay_path(value: str | Path) -> Path:
    """The file ``errata: VALUE`` names: a path, or the name of a shipped overlay."""
    path = Path(str(value)).expanduser()
    if path.is_file():
        return path
    shipped = ERRATA_DIR / f"{value}.yaml"
    if "/" not in str(value) and shipped.is_file():
        return shipped
    known = sorted(p.stem for p in ERRATA_DIR.glob("*.yaml"))
    raise DataError(f"errata: {value}: no such file, nor a shipped overlay (shipped: {known})")


def errata_inputs(spec: dict[str, Any]) -> list[str]:
    """``[overlay file]`` for the prepare rule's input (editing the overlay re-runs prepare)."""
    return [str(overlay_path(spec["errata"]))] if spec.get("errata") else []


def _text(value: Any, loc: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{loc}: '{key}' must be a non-empty string, got {value!r:.60}")
    return value


def load_overlay(path: str | Path) -> Overlay:
    """Read and check an overlay file; a problem is one line naming the file, entry and field."""
    path = Path(path)
    name = path.name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the errata overlay: {exc.strerror}") from exc
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise DataError(f"{name}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(doc, dict):
        raise DataError(f"{name}: expected a mapping with {sorted(_TOP_KEYS)}")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise DataError(f"{name}: unknown key {unknown[0]!r} (known: {sorted(_TOP_KEYS)})")
    overlay_name = _text(doc.get("name"), name, "name")
    benchmark = _text(doc.get("benchmark"), name, "benchmark")
    source = doc.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("url"), str):
        raise DataError(f"{name}: 'source' must be a mapping with the 'url' the errata come from")
    applies_to = doc.get("applies_to") or {}
    if not isinstance(applies_to, dict):
        raise DataError(f"{name}: 'applies_to' must be a mapping {{file, sha256}}")
    items = doc.get("entries")
    if not isinstance(items, list) or not items:
        raise DataError(f"{name}: 'entries' must be a non-empty list")
    entries: list[Erratum] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        loc = f"{name}: entry {i}"
        if not isinstance(item, dict):
            raise DataError(f"{loc}: expected a mapping, got {type(item).__name__}")
        question_id = _text(item.get("question_id"), loc, "question_id")
        loc = f"{name}: entry {i} ({question_id})"
        unknown = sorted(set(item) - _ENTRY_KEYS)
        if unknown:
            raise DataError(f"{loc}: unknown field {unknown[0]!r} (known: {sorted(_ENTRY_KEYS)})")
        if question_id in seen:
            raise DataError(f"{loc}: 'question_id' already given by entry {seen[question_id]}")
        seen[question_id] = i
        action = item.get("action")
        if action not in ACTIONS:
            raise DataError(f"{loc}: 'action' must be one of {', '.join(ACTIONS)}, got {action!r}")
        answer = item.get("answer")
        if action == "correct":
            answer = _text(answer, loc, "answer")
        elif answer is not None:
            raise DataError(f"{loc}: 'answer' is only for action correct, not {action}")
        evidence = item.get("evidence")
        if evidence is not None:
            if action == "drop":
                raise DataError(f"{loc}: 'evidence' is not for action drop")
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise DataError(f"{loc}: 'evidence' must be a list of turn ids, got {evidence!r}")
            evidence = tuple(evidence)
        elif action == "evidence":
            raise DataError(f"{loc}: 'evidence' is required for action evidence")
        entries.append(
            Erratum(
                question_id=question_id,
                question=_text(item.get("question"), loc, "question"),
                action=action,
                reason=_text(item.get("reason"), loc, "reason"),
                answer=answer,
                evidence=evidence,
                ref=str(item.get("ref") or ""),
            )
        )
    return Overlay(
        name=overlay_name,
        benchmark=benchmark,
        path=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
        source=dict(source),
        applies_to=dict(applies_to),
        entries=tuple(entries),
    )


def apply_overlay(
    questions: pd.DataFrame, sessions: pd.DataFrame, overlay: Overlay
) -> pd.DataFrame:
    """``questions`` with each entry's erratum in ``meta.errata`` (gold and evidence as released).

    Checks every entry against the data: the question must exist, its text must be the entry's
    ``question`` exactly, and corrected evidence must name turns of the question's episode.
    """
    name = Path(overlay.path).name
    index = {qid: i for i, qid in enumerate(questions["question_id"])}
    turns = sessions.groupby("episode_id")["turn_id"].agg(set).to_dict() if len(sessions) else {}
    metas = list(questions["meta"])
    for i, erratum in enumerate(overlay.entries):
        loc = f"{name}: entry {i} ({erratum.question_id})"
        row = index.get(erratum.question_id)
        if row is None:
            raise DataError(f"{loc}: 'question_id' names no question of {overlay.benchmark}")
        actual = questions["question"].iat[row]
        if actual != erratum.question:
            raise DataError(
                f"{loc}: 'question' is {erratum.question!r:.60} but the data has {actual!r:.60}"
            )
        episode = questions["episode_id"].iat[row]
        for turn in erratum.evidence or ():
            if episode in turns and turn not in turns[episode]:
                raise DataError(f"{loc}: 'evidence' {turn!r} is no turn of {episode}")
        meta = json.loads(metas[row] or "{}")
        meta["errata"] = erratum.as_meta(overlay.name)
        metas[row] = json.dumps(meta, ensure_ascii=False, sort_keys=True)
    return questions.assign(meta=metas)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_version(
    source_file: str | Path | None, overlay: Overlay | None, source: Any = None
) -> dict[str, Any]:
    """What ``prepared/data_version.json`` records: the source file and the overlay, if any.

    The source is the local file's name and sha256 when the benchmark reads a local file, else
    the pinned ``revision`` / ``sha256`` of its ``source`` entry (a download is checked against
    them), else unknown. The version's ``id`` is the first 12 hex digits of the source's sha256
    (or ``unknown``) plus ``+<overlay name>@<first 12 of the overlay's sha256>`` with an overlay,
    so two runs with equal ids read the same data.
    """
    version: dict[str, Any] = {"source": None, "errata": None}
    ident = "unknown"
    if source_file is not None and Path(source_file).is_file():
        sha = file_sha256(source_file)
        version["source"] = {"file": Path(source_file).name, "sha256": sha}
        ident = sha[:12]
    elif isinstance(source, dict) and (source.get("sha256") or source.get("revision")):
        pinned = {
            k: source[k] for k in ("repo", "file", "url", "revision", "sha256") if k in source
        }
        version["source"] = pinned
        ident = str(source.get("sha256") or source.get("revision"))[:12]
    if overlay is not None:
        version["errata"] = {
            "name": overlay.name,
            "file": Path(overlay.path).name,
            "sha256": overlay.sha256,
            "source": overlay.source.get("url"),
            "counts": overlay.counts(),
        }
        ident += f"+{overlay.name}@{overlay.sha256[:12]}"
    version["id"] = ident
    return version


def errata_of(meta: str | dict | None) -> dict[str, Any] | None:
    """The erratum a question's ``meta`` carries, or None."""
    if isinstance(meta, str):
        meta = json.loads(meta or "{}")
    return (meta or {}).get("errata")
