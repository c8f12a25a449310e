"""LoCoMo (snap-research/locomo, ``locomo10.json``) in unified form.

The file is a list of 10 records ``{sample_id, conversation, qa, event_summary, observation,
session_summary}``. Each record is one episode (one memory): its conversation between
``speaker_a`` and ``speaker_b`` over ``session_N`` lists of ``{speaker, dia_id, text}`` turns, dated
by ``session_N_date_time`` ("1:56 pm on 8 May, 2023").

Choices made here (all documented in docs/data.md):

- ``turn_id`` is the official ``dia_id`` ("D1:3"), so evidence ids match turn ids directly;
  ``session_id`` is ``{sample_id}_s{N}``. Only sessions actually present are read (conv-26 has
  more ``*_date_time`` keys than sessions).
- LoCoMo has no assistant: ``speaker_a`` is stored with role "user" and ``speaker_b`` with role
  "assistant", so that role-aware memories see a two-party chat; ``speaker`` keeps the real name.
- Image turns carry a BLIP caption; the content is the text plus ``" [shares a photo: <caption>]"``
  (the official prompts likewise append "and shared <caption>.").
- ``category`` 1..5 becomes ``question_type`` multi-hop, temporal, open-domain, single-hop,
  adversarial (the numbering of the released file; the paper's table lists them in another order).
  Adversarial items usually have no ``answer``: ``answer`` is then "" and the misleading
  ``adversarial_answer`` is kept in ``meta``; the official scorer counts a reply as correct when it
  says the information is not mentioned.
- Some evidence ids are malformed ("D8:6; D9:17", "D:11:26", "D30:05", space-separated lists).
  They are normalized when the intent is clear; ids that cannot be read, or that name no turn of
  the conversation, are dropped from ``evidence_ids`` and listed in the loader's notes (the raw
  list stays in ``meta.raw_evidence``).

What is refused (the released file has none of these; one line naming file, record and field): a
question of categories 1-4 without ``answer``, an adversarial one without ``adversarial_answer``,
a session without ``session_N_date_time``. What is kept or dropped by rule is counted
(:class:`~mnemoflow.data.registry.Tally`: notes.txt, summary.md, the report): in the released file
444 adversarial questions without ``answer`` kept, 4 questions without evidence kept, 6 evidence
strings normalized, 3 evidence ids dropped (2 naming no turn, 1 unreadable), 0 questions dropped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pandas as pd

from mnemoflow.data.jsonstream import iter_array
from mnemoflow.data.registry import Prepared, Tally, register_loader
from mnemoflow.data.sources import (
    BenchmarkInfo,
    check_available,
    describe,
    resolve_file,
    source_of,
)
from mnemoflow.data.tables import QUESTIONS, SESSIONS
from mnemoflow.data.validate import DataError, as_text, field, parse_time, where

BENCHMARK = "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
#: What the official scorer looks for in a reply to an adversarial question (category 5, no
#: ``answer``): saying the information is not there is the right answer.
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
NAME_TO_CATEGORY = {name: number for number, name in CATEGORIES.items()}
TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %d %b, %Y")
SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
#: The snap-research/locomo commit whose data/locomo10.json has that checksum (as pinned by
#: several independent LoCoMo harnesses; the checksum is also that of the file in ../shared).
COMMIT = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"

INFO = describe(
    BenchmarkInfo(
        name=BENCHMARK,
        title="LoCoMo: very long-term conversational memory (Maharana et al., ACL 2024)",
        licence="CC BY-NC 4.0",
        homepage="https://github.com/snap-research/locomo",
        sources={
            "default": {
                "url": "https://raw.githubusercontent.com/snap-research/locomo/"
                f"{COMMIT}/data/locomo10.json",
                "sha256": SHA256,
            }
        },
        counts="10 conversations, 272 sessions, 5,882 turns, 1,986 questions "
        "(282 multi-hop / 321 temporal / 96 open-domain / 841 single-hop / 446 adversarial)",
        notes=f"pinned to commit {COMMIT[:12]} and by sha256; another version fails the check",
    )
)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D(\d+):(\d+)")


def normalize_evidence(raw: str) -> list[str]:
    """The dia ids a raw evidence string means; [] when it names none.

    Worked examples from locomo10.json: "D8:6; D9:17" -> ["D8:6", "D9:17"], "D:11:26" ->
    ["D11:26"], "D30:05" -> ["D30:5"], "D9:1 D4:4 D4:6" -> three ids, "D" -> [].
    """
    ids = []
    for token in re.split(r"[;,\s]+", raw.strip()):
        match = re.fullmatch(r"D:?(\d+):(\d+)", token)
        if match:
            ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return ids


def session_numbers(conversation: dict[str, Any]) -> list[int]:
    """The session numbers present as turn lists, in order (date-only keys are ignored)."""
    numbers = []
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match and isinstance(value, list):
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def conversation_rows(
    conversation: dict[str, Any],
    *,
    benchmark: str,
    episode_id: str,
    session_prefix: str,
    loc: str,
    roles: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Unified ``sessions`` rows for a LoCoMo-format conversation (also used by MemoryBench)."""
    if roles is None:
        a = field(conversation, "speaker_a", str, f"{loc} conversation")
        b = field(conversation, "speaker_b", str, f"{loc} conversation")
        roles = {a: "user", b: "assistant"}
    rows: list[dict[str, Any]] = []
    for index, number in enumerate(session_numbers(conversation)):
        key = f"session_{number}"
        raw_time = field(conversation, f"{key}_date_time", str, f"{loc} conversation")
        if not raw_time.strip():
            raise DataError(f"{loc} conversation: '{key}_date_time' is empty")
        session_time = parse_time(raw_time, TIME_FORMATS)
        session_id = f"{session_prefix}_s{number}"
        for t, turn in enumerate(conversation[key]):
            tloc = f"{loc} conversation.{key}[{t}]"
            speaker = field(turn, "speaker", str, tloc)
            dia_id = field(turn, "dia_id", str, tloc)
            text = field(turn, "text", str, tloc)
            if speaker not in roles:
                raise DataError(f"{tloc}: speaker {speaker!r} is neither of {sorted(roles)}")
            caption = turn.get("blip_caption")
            if caption:
                text = f"{text} [shares a photo: {caption}]"
            rows.append(
                {
                    "benchmark": benchmark,
                    "episode_id": episode_id,
                    "session_id": session_id,
                    "session_index": index,
                    "session_time": session_time,
                    "step": 0,
                    "turn_id": dia_id,
                    "turn_index": t,
                    "role": roles[speaker],
                    "speaker": speaker,
                    "content": text,
                    "has_evidence": False,
                }
            )
    return rows


def check(spec: dict[str, Any], where: str) -> None:
    """At startup: the file is there, or a pinned download is allowed."""
    check_available(source_of(spec, INFO.sources["default"]), BENCHMARK)


@register_loader(BENCHMARK, check=check)
def load(spec: dict[str, Any]) -> Prepared:
    """Load ``locomo10.json`` named by ``spec['source']`` (default: the pinned upstream file)."""
    path = resolve_file(source_of(spec, INFO.sources["default"]), BENCHMARK)
    return parse(path)


def parse(path) -> Prepared:
    """Convert a ``locomo10.json`` file; see the module docstring for every convention."""
    name = path.name
    sessions: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    repaired: list[str] = []
    dropped: list[str] = []
    no_turn = unreadable = no_evidence = adversarial_without_answer = 0
    for index, record in iter_array(path):
        if not isinstance(record, dict):
            raise DataError(
                f"{where(name, index)}: expected an object, got {type(record).__name__}"
            )
        sample_id = field(record, "sample_id", str, where(name, index))
        loc = where(name, index, sample_id)
        conversation = field(record, "conversation", dict, loc)
        rows = conversation_rows(
            conversation,
            benchmark=BENCHMARK,
            episode_id=sample_id,
            session_prefix=sample_id,
            loc=loc,
        )
        turn_ids = {row["turn_id"] for row in rows}
        evidence_turns: set[str] = set()
        for q, qa in enumerate(field(record, "qa", list, loc)):
            qloc = f"{loc} qa[{q}]"
            question_id = f"{sample_id}_q{q}"
            category = field(qa, "category", int, qloc)
            if category not in CATEGORIES:
                raise DataError(f"{qloc}: 'category' must be 1-5, got {category}")
            question = field(qa, "question", str, qloc)
            raw_evidence = field(qa, "evidence", list, qloc, optional=True, default=[])
            evidence: list[str] = []
            for raw in raw_evidence:
                if not isinstance(raw, str):
                    raise DataError(f"{qloc}: 'evidence' items must be strings, got {raw!r}")
                ids = normalize_evidence(raw)
                if not (len(ids) == 1 and ids[0] == raw):
                    if ids:
                        repaired.append(f"{question_id} {raw!r}->{ids}")
                    else:
                        dropped.append(f"{question_id} {raw!r} (unreadable)")
                        unreadable += 1
                for dia_id in ids:
                    if dia_id not in turn_ids:
                        dropped.append(f"{question_id} {dia_id!r} (no such turn)")
                        no_turn += 1
                    elif dia_id not in evidence:
                        evidence.append(dia_id)
            evidence_turns.update(evidence)
            no_evidence += not evidence
            # the gold: categories 1-4 need an answer; an adversarial question its misleading
            # answer (its gold is "not mentioned"), and an answer only when the file gives one
            answer = field(qa, "answer", (str, int, float), qloc, optional=category == 5)
            adversarial = None
            if category == 5:
                adversarial = field(qa, "adversarial_answer", (str, int, float), qloc)
                adversarial_without_answer += answer is None
            meta = {
                "category": category,
                "adversarial_answer": adversarial,
                "raw_evidence": raw_evidence,
            }
            questions.append(
                {
                    "benchmark": BENCHMARK,
                    "dataset": BENCHMARK,
                    "episode_id": sample_id,
                    "question_id": question_id,
                    "split": "test",
                    "question": question,
                    "answer": "" if answer is None else as_text(answer),
                    "question_type": CATEGORIES[category],
                    "question_time": "",
                    "options": [],
                    "gold_option": -1,
                    "evidence_ids": evidence,
                    "checkpoint": 0,
                    "lang": "en",
                    "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
                }
            )
        for row in rows:
            row["has_evidence"] = row["turn_id"] in evidence_turns
        sessions.extend(rows)
    notes = []
    if repaired:
        notes.append(f"{name}: {len(repaired)} evidence ids normalized: " + "; ".join(repaired))
    if dropped:
        notes.append(f"{name}: {len(dropped)} evidence ids dropped: " + "; ".join(dropped))
    tallies = [
        Tally(adversarial_without_answer, "adversarial questions without 'answer'", "kept",
              "gold: not mentioned; adversarial_answer in meta", "question"),
        Tally(no_evidence, "questions without evidence", "kept",
              "retrieval metrics skip them", "question"),
        Tally(len(repaired), "evidence strings", "normalized", "'D8:6; D9:17', 'D:11:26', ..."),
        Tally(no_turn, "evidence ids naming no turn", "dropped", "meta.raw_evidence keeps them"),
        Tally(unreadable, "unreadable evidence ids", "dropped", "meta.raw_evidence keeps them"),
    ]  # fmt: skip
    return Prepared(
        pd.DataFrame(sessions, columns=SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
        notes=notes,
        tallies=tallies,
    )


def category_counts(questions: pd.DataFrame) -> dict[str, int]:
    return dict(Counter(questions["question_type"]))


def category_of(question_type: str, meta: dict | None = None) -> int:
    """The category number of a unified-table question (meta first, then the type name)."""
    if meta and "category" in meta:
        return int(meta["category"])
    if question_type in NAME_TO_CATEGORY:
        return NAME_TO_CATEGORY[question_type]
    raise ValueError(f"not a LoCoMo question type: {question_type!r}")
