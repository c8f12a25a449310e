"""A seeded, procedural long-term-memory benchmark with evolving user state.

Each user (one episode) has personal attributes whose values change over periods (the protocol's
steps). Across multi-session chat histories the user reveals values among filler turns and
"hard negatives" (facts about other people that share the attribute's words). After every period a
checkpoint asks for each revealed attribute; the gold answer is the latest value at that checkpoint.
Attributes the user never mentions give abstention questions.

Everything is derived from ``seed`` with :class:`random.Random`, so the same parameters always give
identical tables. Sizes range from a tiny test haystack to LongMemEval-M shape (hundreds of
sessions per episode) through ``sessions_per_period`` and ``turns_per_session``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from mnemoflow.data.registry import register_loader
from mnemoflow.data.tables import QUESTIONS, SESSIONS
from mnemoflow.errors import ConfigError, check_types, reject_unknown

BENCHMARK = "synthetic"


@dataclass(frozen=True)
class Attribute:
    key: str
    phrase: str  # "favorite color": used in statements and questions
    values: tuple[str, ...]


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "color",
        "favorite color",
        ("teal", "crimson", "olive", "amber", "lavender", "navy", "coral", "ivory", "maroon"),
    ),
    Attribute(
        "city",
        "home city",
        ("Lisbon", "Osaka", "Denver", "Nairobi", "Krakow", "Montreal", "Adelaide", "Bergen"),
    ),
    Attribute(
        "job",
        "job title",
        ("nurse", "architect", "baker", "data analyst", "pilot", "librarian", "welder", "chemist"),
    ),
    Attribute(
        "pet",
        "pet's name",
        ("Biscuit", "Pepper", "Mochi", "Rufus", "Juniper", "Ziggy", "Clover", "Otis"),
    ),
    Attribute(
        "drink",
        "usual morning drink",
        ("espresso", "green tea", "oat latte", "hot chocolate", "chai", "cold brew", "matcha"),
    ),
    Attribute(
        "sport",
        "weekend sport",
        ("bouldering", "tennis", "rowing", "badminton", "cycling", "volleyball", "fencing"),
    ),
    Attribute(
        "car",
        "car model",
        ("Corolla", "Civic", "Model 3", "Golf", "Outback", "Mazda3", "Leaf", "Prius"),
    ),
    Attribute(
        "instrument",
        "practice instrument",
        ("cello", "ukulele", "trumpet", "banjo", "oboe", "harp", "saxophone", "drums"),
    ),
    Attribute(
        "book",
        "bedtime book",
        ("Dune", "Middlemarch", "Beloved", "Neuromancer", "Persuasion", "Ulysses", "Emma"),
    ),
    Attribute(
        "gym",
        "gym schedule",
        ("Monday mornings", "Tuesday evenings", "weekends", "Friday nights", "every dawn"),
    ),
    Attribute(
        "diet",
        "diet",
        ("vegetarian", "vegan", "pescatarian", "keto", "paleo", "flexitarian"),
    ),
    Attribute(
        "language",
        "target language",
        ("Portuguese", "Japanese", "Swahili", "Polish", "Korean", "Greek", "Finnish", "Turkish"),
    ),
)

REVEAL = (
    "By the way, my {phrase} is {value}.",
    "I should mention that my {phrase} is {value}.",
    "Just so you know, my {phrase} is {value}.",
)
UPDATE = (
    "Update: my {phrase} is now {value}.",
    "Things changed, my {phrase} is {value} these days.",
    "Actually, my {phrase} has changed to {value}.",
)
HARD_NEGATIVE = (
    "My {relation}'s {phrase} is {value}, funny enough.",
    "My {relation} told me their {phrase} is {value}.",
)
RELATIONS = ("sister", "neighbor", "coworker", "cousin", "roommate", "uncle")
FILLER_TOPICS = (
    "the weather this week",
    "a documentary about volcanoes",
    "planning a birthday dinner",
    "fixing a leaky faucet",
    "a podcast on urban gardening",
    "the traffic downtown",
    "organizing my desk",
    "a recipe for lentil soup",
    "choosing a new phone plan",
    "an article on sleep habits",
    "repainting the hallway",
    "a museum exhibit about maps",
)
FILLER_USER = (
    "Can you give me a few tips about {topic}?",
    "I was reading about {topic} and got curious.",
    "What do you think about {topic}?",
    "Help me make a short list for {topic}.",
)
FILLER_ASSISTANT = (
    "Sure, here are some thoughts on {topic}: start small, keep notes, and review weekly.",
    "Happy to help with {topic}. A simple plan usually works best.",
    "Good question about {topic}. It depends on your goals and time.",
)
ACK = ("Thanks for letting me know!", "Got it, I will keep that in mind.", "Noted, thank you.")

DEFAULTS: dict[str, Any] = {
    "users": 4,
    "periods": 3,
    "sessions_per_period": 3,
    "turns_per_session": 6,
    "attributes_per_user": 5,
    "updates_per_period": 2,
    "abstention_per_checkpoint": 1,
    "hard_negative_rate": 0.3,
    "options": 4,
    "seed": 0,
    "start": "2023-01-02T09:00:00",
}


def _params(spec: dict[str, Any], where: str = "config benchmarks.<synthetic>.params") -> dict:
    params = dict(spec.get("params") or {})
    reject_unknown(params, DEFAULTS, where)
    check_types(params, DEFAULTS, where)
    params = {**DEFAULTS, **params}
    if params["attributes_per_user"] + params["abstention_per_checkpoint"] > len(ATTRIBUTES):
        raise ConfigError(
            f"{where}: attributes_per_user + abstention_per_checkpoint "
            f"must be at most {len(ATTRIBUTES)}"
        )
    if params["turns_per_session"] < 2 or params["turns_per_session"] % 2:
        raise ConfigError(f"{where}.turns_per_session: an even number >= 2")
    if params["periods"] < 1 or params["sessions_per_period"] < 1 or params["users"] < 1:
        raise ConfigError(f"{where}: users, periods, sessions_per_period >= 1")
    return params


def check(spec: dict[str, Any], where: str) -> None:
    """The workflow's startup check (``where``: ``config benchmarks.NAME``)."""
    _params(spec, f"{where}.params")


def n_steps(spec: dict[str, Any]) -> int:
    """Steps of the step chain: one per period."""
    return int(_params(spec)["periods"])


@register_loader(BENCHMARK, steps=n_steps, check=check)
def generate(spec: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate (sessions, questions) for the config entry ``spec`` (its ``params`` mapping)."""
    params = _params(spec)
    session_rows: list[dict[str, Any]] = []
    question_rows: list[dict[str, Any]] = []
    for user in range(params["users"]):
        rng = random.Random(f"{params['seed']}:{user}")
        sessions, questions = _user_episode(user, params, rng)
        session_rows.extend(sessions)
        question_rows.extend(questions)
    sessions = pd.DataFrame(session_rows, columns=SESSIONS.names)
    questions = pd.DataFrame(question_rows, columns=QUESTIONS.names)
    return sessions, questions


def _user_episode(
    user: int, params: dict[str, Any], rng: random.Random
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    episode = f"u{user:03d}"
    chosen = rng.sample(
        ATTRIBUTES, params["attributes_per_user"] + params["abstention_per_checkpoint"]
    )
    known, never = chosen[: params["attributes_per_user"]], chosen[params["attributes_per_user"] :]
    history: dict[str, list[tuple[str, str]]] = {a.key: [] for a in known}  # (value, turn_id)
    clock = datetime.fromisoformat(params["start"]) + timedelta(days=user)
    sessions: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    session_index = 0
    for period in range(params["periods"]):
        # Which attributes are stated in this period: all at first, then a few changes.
        if period == 0:
            statements = [(a, rng.choice(a.values), False) for a in known]
        else:
            changing = rng.sample(known, min(params["updates_per_period"], len(known)))
            statements = []
            for attr in changing:
                current = history[attr.key][-1][0]
                statements.append(
                    (attr, rng.choice([v for v in attr.values if v != current]), True)
                )
        slots = [rng.randrange(params["sessions_per_period"]) for _ in statements]
        for s in range(params["sessions_per_period"]):
            session_id = f"{episode}_p{period}_s{s}"
            mine = [st for st, slot in zip(statements, slots, strict=True) if slot == s]
            turns = _session_turns(mine, params, rng)
            stamp = clock.isoformat(timespec="minutes")
            for t, (role, content, attr_key, value) in enumerate(turns):
                turn_id = f"{session_id}_t{t}"
                if attr_key:
                    history[attr_key].append((value, turn_id))
                sessions.append(
                    {
                        "benchmark": BENCHMARK,
                        "episode_id": episode,
                        "session_id": session_id,
                        "session_index": session_index,
                        "session_time": stamp,
                        "step": period,
                        "turn_id": turn_id,
                        "turn_index": t,
                        "role": role,
                        "speaker": "user" if role == "user" else "assistant",
                        "content": content,
                        "has_evidence": bool(attr_key),
                    }
                )
            session_index += 1
            clock += timedelta(days=rng.randint(1, 3), minutes=rng.randint(0, 600))
        questions.extend(
            _checkpoint_questions(
                episode,
                period,
                known,
                never,
                history,
                params,
                rng,
                clock.isoformat(timespec="minutes"),
            )
        )
    return sessions, questions


def _session_turns(
    statements: list[tuple[Attribute, str, bool]], params: dict[str, Any], rng: random.Random
) -> list[tuple[str, str, str, str]]:
    """(role, content, revealed attribute key or "", value) for every turn of one session."""
    # A session grows beyond turns_per_session when it must carry more statements than it has pairs.
    pairs = max(params["turns_per_session"] // 2, len(statements))
    reveal_at = dict(zip(rng.sample(range(pairs), len(statements)), statements, strict=True))
    turns: list[tuple[str, str, str, str]] = []
    for pair in range(pairs):
        topic = rng.choice(FILLER_TOPICS)
        if pair in reveal_at:
            attr, value, is_update = reveal_at[pair]
            template = rng.choice(UPDATE if is_update else REVEAL)
            turns.append(
                ("user", template.format(phrase=attr.phrase, value=value), attr.key, value)
            )
            turns.append(("assistant", rng.choice(ACK), "", ""))
            continue
        text = rng.choice(FILLER_USER).format(topic=topic)
        if rng.random() < params["hard_negative_rate"]:
            attr = rng.choice(ATTRIBUTES)
            text += " " + rng.choice(HARD_NEGATIVE).format(
                relation=rng.choice(RELATIONS), phrase=attr.phrase, value=rng.choice(attr.values)
            )
        turns.append(("user", text, "", ""))
        turns.append(("assistant", rng.choice(FILLER_ASSISTANT).format(topic=topic), "", ""))
    return turns


def _checkpoint_questions(
    episode: str,
    period: int,
    known: list[Attribute],
    never: list[Attribute],
    history: dict[str, list[tuple[str, str]]],
    params: dict[str, Any],
    rng: random.Random,
    asked_at: str,
) -> list[dict[str, Any]]:
    rows = []
    for attr in known:
        values = history[attr.key]
        gold, evidence = values[-1]
        past = [v for v, _ in values[:-1] if v != gold]
        options = _options(gold, past, attr, params["options"], rng)
        rows.append(
            _question(
                episode,
                period,
                attr,
                question_id=f"{episode}_p{period}_{attr.key}",
                answer=gold,
                qtype="updated-fact" if past else "single-fact",
                options=options,
                gold_option=options.index(gold),
                evidence=[evidence],
                asked_at=asked_at,
                meta={"attribute": attr.key, "history": [v for v, _ in values]},
            )
        )
    for attr in never:
        rows.append(
            _question(
                episode,
                period,
                attr,
                question_id=f"{episode}_p{period}_{attr.key}_abs",
                answer="The user never mentioned this.",
                qtype="abstention",
                options=[],
                gold_option=-1,
                evidence=[],
                asked_at=asked_at,
                meta={"attribute": attr.key, "history": []},
            )
        )
    return rows


def _options(gold: str, past: list[str], attr: Attribute, n: int, rng: random.Random) -> list[str]:
    """Gold, older values first as distractors, then random values; shuffled with the seed."""
    options = [gold] + list(dict.fromkeys(past))[: n - 1]
    others = [v for v in attr.values if v not in options]
    options += rng.sample(others, max(0, min(n - len(options), len(others))))
    rng.shuffle(options)
    return options


def _question(
    episode: str,
    period: int,
    attr: Attribute,
    *,
    question_id: str,
    answer: str,
    qtype: str,
    options: list[str],
    gold_option: int,
    evidence: list[str],
    asked_at: str,
    meta: dict[str, Any],
) -> dict[str, Any]:
    return {
        "benchmark": BENCHMARK,
        "dataset": BENCHMARK,
        "episode_id": episode,
        "question_id": question_id,
        "split": "test",
        "question": f"What is my {attr.phrase}?",
        "answer": answer,
        "question_type": qtype,
        "question_time": asked_at,
        "options": options,
        "gold_option": gold_option,
        "evidence_ids": evidence,
        "checkpoint": period,
        "lang": "en",
        "meta": json.dumps(meta, sort_keys=True),
    }
