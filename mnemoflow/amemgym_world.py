"""What the offline AMemGym environment writer and the offline assistant both know: the world of
the topic templates (``data/amemgym_topics.yaml``).

An environment written by an LLM and an assistant played by an LLM share world knowledge: both
know that "keep every session short and sneak movement into your day" is advice for someone with
under two hours of exercise a week. The offline stand-ins share it through this module, and
nothing else: the writer uses it to *write* sentences and advice (and to check them), the
assistant to *read* them. The assistant never sees data.json, the user's state or which option
holds which state; it reads the question, the options shown and its own context, and decodes them
with this knowledge as a model would.

Reading is by whole phrases over normalized words (lowercase, possessives as "my": "your",
"their", "user's" all read "my"), never by stem sets: "over an hour" and "about an hour" differ,
and "up and down" is a value, not stop words. A sentence states a type's value when it names one
of the type's choices and one of its cue words (the type's label words, e.g. "sleep" for
``sleep_quality``), and is not a question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from mnemoflow.lexical import sentences, stems, words

#: The topic templates (the repository's ``data/`` folder).
TOPICS = Path(__file__).resolve().parents[1] / "data" / "amemgym_topics.yaml"

#: Stances for a value of a type without templates, by the value's position among its choices.
GENERIC_STANCES = (
    "keep everything about {label} at the simplest, lowest-effort level",
    "take a balanced, middle-of-the-road approach to {label}",
    "plan for the most demanding, all-in version of {label}",
    "try an unconventional angle on {label} rather than the usual routine",
    "revisit {label} every few weeks and adjust in small steps",
    "hand {label} over to a fixed weekly schedule you never skip",
)

#: Words read as "my" when phrases are compared: a statement keeps its value when a writer
#: retells it ("living with my partner" / "living with user's partner" / "... your partner").
POSSESSIVES = frozenset({"my", "your", "their", "his", "her", "user's", "mine", "yours"})
#: Who said a context text, from its leading speaker label ("assistant: ...", "USER INPUT: ...").
_SPEAKER = re.compile(r"^\s*(USER INPUT|ASSISTANT RESPONSE|user|assistant)\s*:\s*", re.IGNORECASE)


@cache
def topics() -> dict[str, Any]:
    return yaml.safe_load(TOPICS.read_text(encoding="utf-8"))


def types() -> dict[str, Any]:
    return topics()["types"]


def label(name: str) -> str:
    return name.replace("_", " ")


# ---- writing ------------------------------------------------------------------------------------


def fragment(name: str, choices: list[str], value: str) -> str:
    """The advice fragment for ``name = value``; it does not name the value. A type without
    templates gets a generic stance by the value's position among ``choices``."""
    template = types().get(name)
    if (
        template
        and value in template["choices"]
        and len(template["advice"]) == len(template["choices"])
    ):
        return template["advice"][template["choices"].index(value)]
    index = choices.index(value)
    stance = GENERIC_STANCES[index % len(GENERIC_STANCES)].format(label=label(name))
    return stance if index < len(GENERIC_STANCES) else f"{stance} (variation {index + 1})"


def advice(required: list[str], choices: Mapping[str, list[str]], variant: list[str]) -> str:
    """One sentence of advice made of one fragment per value: "Frag one, and frag two."."""
    parts = [fragment(n, choices[n], v) for n, v in zip(required, variant, strict=True)]
    text = parts[0][0].upper() + parts[0][1:]
    for part in parts[1:]:
        text += f", and {part}"
    return text + "."


def sentence(name: str, value: str) -> str:
    """The first-person statement of ``name = value`` ("My diet is vegetarian these days.")."""
    template = types().get(name)
    if template and value in template["choices"]:
        return template["sentence"].format(value=value)
    return f"As for my {label(name)}, it's {value}."


def request(name: str) -> str:
    template = types().get(name)
    if template:
        return template["request"]
    return f"What would you suggest given my {label(name)}?"


def query(exposed: Mapping[str, str], opening: str = "") -> str:
    """A user message saying each exposed value, then asking about the first type."""
    said = [sentence(n, v) for n, v in exposed.items()]
    return opening + " ".join(said) + " " + request(next(iter(exposed)))


# ---- reading ------------------------------------------------------------------------------------


def phrase(text: str) -> tuple[str, ...]:
    """Normalized words of ``text``: lowercase, every possessive read as "my"."""
    return tuple("my" if w in POSSESSIVES else w for w in words(text))


def _find(needle: tuple[str, ...], hay: tuple[str, ...]) -> list[int]:
    n = len(needle)
    return [i for i in range(len(hay) - n + 1) if n and hay[i : i + n] == needle]


@cache
def cues(name: str) -> frozenset[str]:
    """Stems that say a sentence is about type ``name``: its label's words."""
    return frozenset(stems(label(name)))


def statements(text: str, schema: Mapping[str, Iterable[str]] | None = None) -> dict[str, str]:
    """{type: value} stated in ``text``, sentence by sentence (a later sentence wins).

    ``schema`` limits the types and their values (default: every template type). A sentence
    states a value when it names the value as a whole phrase and a cue word of its type, and is
    no question; a phrase inside a longer matched phrase does not count, and of two values of one
    type in a sentence the later one wins ("from X to Y").
    """
    known = schema or {name: t["choices"] for name, t in types().items()}
    out: dict[str, str] = {}
    for said in sentences(text):
        if said.rstrip().endswith("?"):
            continue
        hay = phrase(said)
        said_cues = set(stems(said))
        hits = [
            (start, start + len(needle), name, value)
            for name, values in known.items()
            if cues(name) & said_cues
            for value in values
            for needle in [phrase(str(value))]
            for start in _find(needle, hay)
        ]
        for start, end, name, value in sorted(hits):
            inside = any(s <= start and end <= e and (s, e) != (start, end) for s, e, *_ in hits)
            if not inside:
                out[name] = value
    return out


def implied_values(option: str) -> dict[str, str]:
    """{type: value} whose advice fragment ``option`` contains (the longest fragment per type)."""
    hay = phrase(option)
    found: dict[str, tuple[int, str]] = {}
    for name, template in types().items():
        for value, text in zip(template["choices"], template["advice"], strict=True):
            needle = phrase(text)
            if _find(needle, hay) and len(needle) > found.get(name, (0, ""))[0]:
                found[name] = (len(needle), value)
    return {name: value for name, (_, value) in found.items()}


def speaker_of(entry: Any) -> tuple[str, str]:
    """(role, text) of a context entry: a ``{"role", "text"}`` mapping, or a text whose leading
    speaker label names the role (``""``: unknown, e.g. a memory note about the user)."""
    if isinstance(entry, Mapping):
        role, text = str(entry.get("role") or ""), str(entry.get("text") or "")
    else:
        role, text = "", str(entry)
    match = _SPEAKER.match(text)
    if match:
        said = match.group(1).lower()
        role = role or ("assistant" if said.startswith("assistant") else "user")
        text = text[match.end() :]
    return role, text


#: "my <subject> is <value>" (or a note's "user's <subject>: <value>"): a statement about
#: something the topic world does not know.
_OPEN = re.compile(
    r"\b(?:my|user's|your)\s+([a-z][a-z' -]{0,40}?)"
    r"(?:\s+(?:is|are|has been|have been)\s+|:\s*)(?:now\s+|still\s+)?(.+)$",
    re.IGNORECASE,
)
#: What follows a value without being part of it: an afterthought, a time adverbial.
_AFTER_VALUE = re.compile(
    r"(?:,.*|\s+(?:now|these days|nowadays|currently|at the moment|right now|lately|recently"
    r"|this season|at this point))+\s*$",
    re.IGNORECASE,
)


def open_statements(text: str) -> dict[str, str]:
    """{subject: value} of "my <subject> is <value>" sentences and "user's <subject>: <value>"
    notes (no questions): how a reader takes in a fact about a type the topic world does not
    know ("My city is Osaka now")."""
    out = {}
    for said in sentences(text):
        if said.rstrip().endswith("?"):
            continue
        match = _OPEN.search(said.strip().rstrip(".!"))
        if match:
            value = _AFTER_VALUE.sub("", match.group(2)).strip()
            if value:
                out[match.group(1).strip().lower()] = value
    return out


@dataclass
class Belief:
    """What the assistant believes: per type, the latest value stated (``current``) and every
    value stated, oldest first (``seen``). A type is a topic-world type name, a schema's type
    name, or the subject of an open statement."""

    current: dict[str, str] = field(default_factory=dict)
    seen: dict[str, list[str]] = field(default_factory=dict)

    def learn(self, stated: Mapping[str, str]) -> None:
        for name, value in stated.items():
            self.current[name] = value
            self.seen.setdefault(name, []).append(value)


def _given_state(text: str) -> dict[str, str] | None:
    """A context text that is a JSON object of states (the upper bound's given state)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str | int | float)}


def belief(context: Iterable[Any], schema: Mapping[str, Iterable[str]] | None = None) -> Belief:
    """Read ``context`` (oldest first) as the assistant does: statements that are not its own,
    the latest per type winning; a given state object states each of its types. Without a
    ``schema`` the topic world's types are read, and "my X is Y" about anything else."""
    known = schema or {name: t["choices"] for name, t in types().items()}
    read = Belief()
    for entry in context:
        role, text = speaker_of(entry)
        if role == "assistant":
            continue
        given = _given_state(text.strip())
        if given is not None:
            read.learn(given)
            continue
        for said in sentences(text):
            stated = statements(said, known)
            if not stated and schema is None:
                stated = open_statements(said)
            read.learn(stated)
    return read


def consistency(option: str, believed: Belief) -> int:
    """How well ``option`` fits the belief: +1 per value it implies (its advice fragments) or
    names (a value stated for a type) that is believed, -1 per one that is contradicted."""
    implied = implied_values(option)
    hay = phrase(option)
    for name, values in believed.seen.items():
        named = [v for v in dict.fromkeys(values) if _find(phrase(v), hay)]
        if named and name not in implied:
            current = believed.current.get(name)
            implied[name] = current if current in named else named[-1]
    score = 0
    for name, value in implied.items():
        if name in believed.current:
            score += 1 if believed.current[name] == value else -1
    return score
