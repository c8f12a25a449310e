"""The false-positive probe: wrong answers built from the gold, which a sound judge rejects.

For a seeded sample of answerable questions, three answers that are wrong by construction:

- ``swapped``: the gold with its key date, number or name replaced by another of the same kind
  found in the question's own conversation (haystack), so the wrong answer is plausible; where
  the gold holds none of them, another gold answer of the same conversation (same question type
  first) that shares no word with it stands in for it;
- ``vague``: an answer that commits to nothing (``Something we talked about at some point.``);
- ``abstention``: a refusal to answer a question the conversation does answer.

A judge that accepts these is lenient: its accuracy counts wrong answers as right. The rate at
which each judge accepts them is reported beside its accuracy
(:mod:`mnemoflow.eval.static_qa.panel`).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.eval.static_qa.retrieval import is_abstention
from mnemoflow.lexical import stems, words

#: Probes per run by default (``judge.probe.size``); a run with fewer questions uses them all.
DEFAULT_SIZE = 100
#: The probe kinds, in the order each sampled question gets them.
KINDS = ("swapped", "vague", "abstention")

VAGUE = {
    "date": "At some point in the past; I don't remember exactly when.",
    "number": "A few, I think.",
    "name": "Someone or something we talked about before.",
    "answer": "Something we talked about at some point.",
}
ABSTENTION = "I don't know; that was never mentioned in our conversations."

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    r"\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?"
    r"(?:,?\s+\d{4})?"
    r"|(?:19|20)\d{2})\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
#: Capitalized words that are not names (sentence starts, pronouns, days are still names).
_NOT_NAMES = frozenset(
    "I The A An It He She They We You My Your His Her Their Our This That These Those Yes No "
    "Oh Hi Hello Hey Thanks Thank Sure Well So But And Or If When What Where Who Why How Is Are "
    "Was Were Do Did Does Can Could Would Should Will Just Also Not Maybe Great Good Nice Wow "
    "Okay Ok Really Of In On At To For With From By As".split()
)


@dataclass(frozen=True)
class Probe:
    """One wrong answer to one question: which kind, what it says, what was swapped for what."""

    question_id: str
    kind: str
    response: str
    detail: str = ""


def _mid_sentence(text: str, start: int) -> bool:
    """Whether a capitalized word at ``start`` is inside a sentence (so a name, not a start)."""
    before = text[max(0, start - 40) : start].rstrip(" \t\"'(")
    return bool(before) and before[-1] not in ".!?:;\n"


def _spans(pattern: re.Pattern[str], text: str) -> list[str]:
    """The spans ``pattern`` finds; for names, only capitalized words inside a sentence (a
    sentence's first word is capitalized whatever it is) whose words the text never writes in
    lower case (``Dance`` beside ``dance`` is no name)."""
    text = text or ""
    lower = set(re.findall(r"\b[a-z]+\b", text)) if pattern is _NAME else set()
    found = []
    for match in pattern.finditer(text):
        span = match.group(0).strip()
        if pattern is _NAME and (
            span.split()[0] in _NOT_NAMES
            or not _mid_sentence(text, match.start())
            or any(word.lower() in lower for word in span.split())
        ):
            continue
        if span:
            found.append(span)
    return found


def _keys(kind: str, pattern: re.Pattern[str], gold: str, names: set[str]) -> list[str]:
    """The gold's facts of one kind: dates, numbers outside its dates, and names (a gold is
    short and often only the name: a capitalized word counts when the conversation uses it as
    a name, ``names``, or the gold does, inside its own sentence)."""
    if kind == "name":
        return [
            m.group(0)
            for m in pattern.finditer(gold)
            if m.group(0) in names or m.group(0) in _spans(pattern, gold)
        ]
    keys = _spans(pattern, gold)
    if kind == "number":
        keys = [k for k in keys if not any(k in d for d in _spans(_DATE, gold))]
    return keys


def _number_value(text: str) -> float:
    return float(text)


def _replace_once(text: str, old: str, new: str) -> str:
    return re.sub(re.escape(old), lambda _m: new, text, count=1)


def _swap(gold: str, text: str, others: list[str], rng: random.Random) -> tuple[str, str, str]:
    """(wrong answer, kind of what was swapped, "old -> new"), or ("", kind, "") when the
    conversation holds nothing of the kind to swap in."""
    low = gold.lower()
    names = set(_spans(_NAME, text))
    for kind, pattern in (("date", _DATE), ("number", _NUMBER), ("name", _NAME)):
        keys = _keys(kind, pattern, gold, names)
        if not keys:
            continue
        key = keys[0]
        found = names if kind == "name" else _spans(pattern, text)
        pool = sorted({c for c in found if c.lower() not in low})
        if kind == "number":  # off-by-one is accepted by some judges on purpose: stay clear of it
            pool = [c for c in pool if abs(_number_value(c) - _number_value(key)) > 1]
        if pool:
            new = rng.choice(pool)
            return _replace_once(gold, key, new), kind, f"{key} -> {new}"
        return "", kind, ""
    said = set(stems(gold)) | {w for w in words(gold) if w in ("yes", "no")}
    pool = sorted(  # another gold that shares no word of this one ("likely no" is no swap)
        {o for o in others if o.strip() and not said & (set(stems(o)) | set(words(o)))}
    )
    if pool:
        new = rng.choice(pool)
        return new, "answer", f"{gold} -> {new}"
    return "", "answer", ""


def _order(question_ids: Iterable[str], seed: int) -> list[str]:
    """The questions in a seeded order that does not depend on the table's row order."""

    def rank(qid: str) -> str:
        return hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest()

    return sorted(question_ids, key=rank)


def build_probes(
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    size: int = DEFAULT_SIZE,
    seed: int = 0,
    judged: Callable[[dict[str, Any]], bool] = lambda question: True,
) -> list[Probe]:
    """At least ``size`` probes (fewer only when the questions run out), from questions taken in
    a seeded order; each taken question gives its swapped answer (when one can be built), its
    vague answer and its wrong abstention. Abstention questions, questions without a gold answer
    and those ``judged`` refuses (no judge scores them) are left out."""
    if size < 1:
        raise ValueError(f"judge.probe.size must be >= 1, got {size}")
    turns = sessions.groupby("episode_id")["content"]  # joined only for the questions taken
    by_id = {q["question_id"]: q for q in questions.to_dict("records")}
    golds: dict[tuple[str, str], list[str]] = {}
    for q in by_id.values():
        if not is_abstention(q["question_id"]):
            key = (q["episode_id"], q["question_type"])
            golds.setdefault(key, []).append(str(q["answer"] or ""))
    probes: list[Probe] = []
    for qid in _order(by_id, seed):
        if len(probes) >= size:
            break
        question = by_id[qid]
        gold = str(question["answer"] or "").strip()
        if not gold or is_abstention(qid) or not judged(question):
            continue
        rng = random.Random(f"{seed}:{qid}")
        episode = question["episode_id"]
        text = "\n".join(map(str, turns.get_group(episode))) if episode in turns.groups else ""
        same_type = golds.get((episode, question["question_type"]), [])
        others = [a for (e, _), answers in sorted(golds.items()) if e == episode for a in answers]
        swapped, kind, detail = _swap(gold, text, same_type, rng)
        if not swapped:  # no gold of the same type to stand in: any of the conversation's
            swapped, kind, detail = _swap(gold, text, others, rng)
        if swapped:
            probes.append(Probe(qid, "swapped", swapped, detail))
        probes.append(Probe(qid, "vague", VAGUE[kind]))
        probes.append(Probe(qid, "abstention", ABSTENTION))
    return probes


def probe_answers(probes: list[Probe], questions: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """The probes as an answers-like frame (run keys, question_id, response) for the judges,
    with ``probe`` (kind) and ``detail``; system ``probe``, protocol ``qa``, step 0."""
    types = dict(zip(questions.question_id, questions.question_type, strict=True))
    rows = [
        {
            "benchmark": benchmark,
            "system": "probe",
            "protocol": "qa",
            "step": 0,
            "question_id": p.question_id,
            "question_type": types[p.question_id],
            "response": p.response,
            "probe": p.kind,
            "detail": p.detail,
        }
        for p in probes
    ]
    columns = ["benchmark", "system", "protocol", "step", "question_id", "question_type"]
    return pd.DataFrame(rows, columns=[*columns, "response", "probe", "detail"])
