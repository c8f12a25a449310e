"""LongMemEval (xiaowu0162/LongMemEval; s / m / oracle) in unified form, streamed.

Each file is a JSON array of 500 records ``{question_id, question_type, question, answer,
question_date, haystack_dates, haystack_session_ids, haystack_sessions, answer_session_ids}``.
Every question is its own episode with its own haystack, but haystacks draw on one pool of
sessions, so:

- each distinct session is stored once in ``sessions`` (``episode_id`` = "") and listed per
  question, in haystack order and with the haystack's date, in ``episode_sessions``;
- ``session_id`` is the official haystack session id. Sessions are compared by content (roles,
  texts and ``has_answer`` flags); if two different contents share an id, the later one gets the
  id ``<id>#<8 hex of its content hash>`` and the loader's notes say so;
- ``turn_id`` follows the official retrieval scheme ``<session_id>_<k>``, k 1-based over all the
  session's turns (user and assistant), and ``has_evidence`` is the turn's ``has_answer``;
- abstention questions are those whose id ends in ``_abs`` (their ``question_type`` stays the
  base type; ``meta.abstention`` is true). The official retrieval metrics skip them;
- ``evidence_ids`` are the evidence turn ids (``has_answer``) of the question's haystack, or the
  ``answer_session_ids`` when no turn is marked; ``meta`` keeps both lists apart;
- ``answer`` may be an int in the file; it is stored as a string. Dates such as
  "2023/05/30 (Tue) 23:40" become ISO 8601 ("2023-05-30T23:40").

The m file is 2.7 GB: records are decoded one at a time (:mod:`mnemoflow.data.jsonstream`), so
memory grows with the distinct sessions kept, not with the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.jsonstream import iter_array
from mnemoflow.data.registry import Prepared, register_loader
from mnemoflow.data.sources import (
    BenchmarkInfo,
    check_available,
    describe,
    resolve_file,
    source_of,
)
from mnemoflow.data.tables import EPISODE_SESSIONS, QUESTIONS, SESSIONS
from mnemoflow.data.validate import DataError, as_text, field, parse_time, where

BENCHMARK = "longmemeval"
CLEANED = "xiaowu0162/longmemeval-cleaned"
ORIGINAL = "xiaowu0162/longmemeval"
FILES = {
    "cleaned": {
        "s": "longmemeval_s_cleaned.json",
        "m": "longmemeval_m_cleaned.json",
        "oracle": "longmemeval_oracle.json",
    },
    # File names as listed in the original repo's tree at commit d8673c8 (no extension).
    "original": {"s": "longmemeval_s", "m": "longmemeval_m", "oracle": "longmemeval_oracle"},
}
#: The commit of xiaowu0162/longmemeval-cleaned and the checksums of its three files, as pinned
#: by many independent LongMemEval harnesses (not recomputed here: no network; a download is
#: checked against them). Sizes: oracle 15,388,478 B, s 277,383,467 B, m 2,737,100,077 B.
REVISION = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
SHA256 = {
    ("cleaned", "oracle"): "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c",
    ("cleaned", "s"): "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442",
    ("cleaned", "m"): "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f",
}
ROLES = ("user", "assistant")
_WEEKDAY = re.compile(r"\s*\([A-Za-z]{3}\)\s*")

INFO = describe(
    BenchmarkInfo(
        name=BENCHMARK,
        title="LongMemEval: long-term interactive memory of chat assistants (Wu et al., ICLR 2025)",
        licence="MIT",
        homepage="https://github.com/xiaowu0162/LongMemEval",
        sources={
            f"{variant}": {
                "repo": CLEANED,
                "file": name,
                "revision": REVISION,
                "sha256": SHA256[("cleaned", variant)],
            }
            for variant, name in FILES["cleaned"].items()
        },
        counts="500 questions per variant (30 abstention); s ~115k tokens (~50 sessions) per "
        "haystack, m ~500 sessions per haystack, oracle = evidence sessions only",
        notes="the cleaned release is pinned by commit and sha256; the original release "
        "(release: original) needs source.revision and source.sha256",
    )
)


def parse_date(text: str) -> str:
    """ "2023/05/30 (Tue) 23:40" -> "2023-05-30T23:40"; unparseable strings are kept."""
    return parse_time(_WEEKDAY.sub(" ", text), ("%Y/%m/%d %H:%M", "%Y/%m/%d"))


def source_for(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``source``, or the default download spec for its ``variant`` / ``release``
    (the pinned commit and checksum of the cleaned release; ``download`` from the spec)."""
    if spec.get("source"):
        return spec["source"]
    variant = spec.get("variant", "s")
    release = spec.get("release", "cleaned")
    if release not in FILES or variant not in FILES[release]:
        raise DataError(
            f"{BENCHMARK}: unknown variant {variant!r} / release {release!r}; "
            f"variants {sorted(FILES['cleaned'])}, releases {sorted(FILES)}"
        )
    repo = CLEANED if release == "cleaned" else ORIGINAL
    pinned = {
        "repo": repo,
        "file": FILES[release][variant],
        "revision": spec.get("revision") or (REVISION if release == "cleaned" else None),
        "sha256": SHA256.get((release, variant)),
    }
    return source_of(spec, pinned)


def check(spec: dict[str, Any], where: str) -> None:
    """At startup: ``limit``, and the file is there or a pinned download is allowed."""
    _limit(spec)
    check_available(source_for(spec), BENCHMARK)


def _limit(spec: dict[str, Any]) -> int | None:
    limit = spec.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise DataError(f"{BENCHMARK}: 'limit' must be a positive integer, got {limit!r}")
    return limit


@register_loader(BENCHMARK, check=check)
def load(spec: dict[str, Any]) -> Prepared:
    """Load the LongMemEval file named by ``spec['source']`` (``limit``: first N questions)."""
    path = resolve_file(source_for(spec), BENCHMARK)
    return parse(path, limit=_limit(spec))


def _turns(session: Any, loc: str) -> list[tuple[str, str, bool]]:
    if not isinstance(session, list):
        raise DataError(f"{loc}: a session must be a list of turns, got {type(session).__name__}")
    turns = []
    for k, turn in enumerate(session):
        tloc = f"{loc}[{k}]"
        role = field(turn, "role", str, tloc)
        if role not in ROLES:
            raise DataError(f"{tloc}: 'role' must be user or assistant, got {role!r}")
        content = field(turn, "content", str, tloc)
        has_answer = field(turn, "has_answer", bool, tloc, optional=True, default=False)
        turns.append((role, content, has_answer))
    return turns


class _SessionPool:
    """Distinct sessions, stored once, as column lists (compact for millions of turns)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in SESSIONS.names}
        self.by_id: dict[str, str] = {}  # official id -> content hash of the stored session
        self.stored: set[str] = set()  # final session ids already stored
        self.collisions: list[str] = []

    def add(self, session_id: str, date: str, turns: list[tuple[str, str, bool]]) -> str:
        """Store ``turns`` under ``session_id`` unless already there; return the final id."""
        digest = hashlib.sha1(
            json.dumps(turns, ensure_ascii=False).encode("utf-8"), usedforsecurity=False
        ).hexdigest()
        first = self.by_id.setdefault(session_id, digest)
        final = session_id if first == digest else f"{session_id}#{digest[:8]}"
        if final in self.stored:
            return final
        if final != session_id:
            self.collisions.append(f"{session_id} -> {final}")
        self.stored.add(final)
        cols = self.columns
        for k, (role, content, has_answer) in enumerate(turns):
            cols["benchmark"].append(BENCHMARK)
            cols["episode_id"].append("")
            cols["session_id"].append(final)
            cols["session_index"].append(0)
            cols["session_time"].append(date)
            cols["step"].append(0)
            cols["turn_id"].append(f"{final}_{k + 1}")
            cols["turn_index"].append(k)
            cols["role"].append(role)
            cols["speaker"].append(role)
            cols["content"].append(content)
            cols["has_evidence"].append(has_answer)
        return final


def parse(path: Path, limit: int | None = None) -> Prepared:
    """Convert a LongMemEval JSON file, one record at a time."""
    name = path.name
    pool = _SessionPool()
    episodes: dict[str, list[Any]] = {n: [] for n in EPISODE_SESSIONS.names}
    questions: list[dict[str, Any]] = []
    seen_questions: set[str] = set()
    for index, record in iter_array(path):
        if limit is not None and index >= limit:
            break
        loc = where(name, index)
        question_id = field(record, "question_id", str, loc)
        loc = where(name, index, question_id)
        if question_id in seen_questions:
            raise DataError(f"{loc}: duplicate question_id")
        seen_questions.add(question_id)
        question_type = field(record, "question_type", str, loc)
        question = field(record, "question", str, loc)
        answer = field(record, "answer", (str, int, float), loc)
        question_date = field(record, "question_date", str, loc)
        dates = field(record, "haystack_dates", list, loc)
        ids = field(record, "haystack_session_ids", list, loc)
        haystack = field(record, "haystack_sessions", list, loc)
        answer_ids = field(record, "answer_session_ids", list, loc)
        if not len(dates) == len(ids) == len(haystack):
            raise DataError(
                f"{loc}: haystack_dates ({len(dates)}), haystack_session_ids ({len(ids)}) and "
                f"haystack_sessions ({len(haystack)}) must have the same length"
            )
        final_ids: dict[str, str] = {}
        evidence_turns: list[str] = []
        for i, (session_id, date, session) in enumerate(zip(ids, dates, haystack, strict=True)):
            if not isinstance(session_id, str):
                raise DataError(f"{loc} haystack_session_ids[{i}]: must be a string")
            if not isinstance(date, str):
                raise DataError(f"{loc} haystack_dates[{i}]: must be a string")
            turns = _turns(session, f"{loc} haystack_sessions[{i}]")
            iso = parse_date(date)
            final = pool.add(session_id, iso, turns)
            final_ids.setdefault(session_id, final)
            evidence_turns += [f"{final}_{k + 1}" for k, t in enumerate(turns) if t[2]]
            for column, value in zip(
                EPISODE_SESSIONS.names, (BENCHMARK, question_id, final, i, iso, 0), strict=True
            ):
                episodes[column].append(value)
        answer_sessions = [final_ids.get(str(s), str(s)) for s in answer_ids]
        abstention = question_id.endswith("_abs")
        meta = {
            "abstention": abstention,
            "answer_session_ids": answer_sessions,
            "answer_turn_ids": evidence_turns,
        }
        questions.append(
            {
                "benchmark": BENCHMARK,
                "dataset": BENCHMARK,
                "episode_id": question_id,
                "question_id": question_id,
                "split": "test",
                "question": question,
                "answer": as_text(answer),
                "question_type": question_type,
                "question_time": parse_date(question_date),
                "options": [],
                "gold_option": -1,
                "evidence_ids": evidence_turns or answer_sessions,
                "checkpoint": 0,
                "lang": "en",
                "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
            }
        )
    notes = []
    if pool.collisions:
        notes.append(
            f"{name}: {len(pool.collisions)} session ids reused for different contents, "
            "disambiguated: " + "; ".join(pool.collisions[:20])
        )
    return Prepared(
        pd.DataFrame(pool.columns, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
        pd.DataFrame(episodes, columns=EPISODE_SESSIONS.names),
        notes=notes,
    )
