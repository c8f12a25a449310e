"""A seeded, offline AMemGym environment generator writing the reference's ``data.json`` schema.

The reference builds its environments with an LLM (questions, schema, state evolution, answers,
queries; see ../shared/docs/amemgym.md section 1). This generator follows the same steps and rules
with templates instead of a model, so that the interactive family runs with no network and the
same seed gives the same bytes:

- personas from the shipped pool ``data/amemgym_personas.jsonl``, ``user_profile.formatted_str``
  built as the reference builds it ("key: value" lines, name .. complementary_info);
- questions sampled from ``data/amemgym_topics.yaml`` (two info types each, three choices per
  type); ``state_schema`` is the union of their types (questions share types, as after the
  reference's merge step);
- initial state: one value per type, the middle choice preferred (the reference asks for
  "preferably mid-range"); period k: n - 1 .. n + 1 changes (n = ``changes_per_period``),
  types changed fewer than ``max_changes_per_state`` times first, each new value different
  from the old one;
- sessions: period 0's queries cover every type in groups of 1-3; an update period has one
  query per event (groups of 1-2 changed types). A query exposes exactly its ``exposed_states``:
  one first-person sentence naming each value, then a request;
- session times: the last n days up to and including the period's end (period 0: the start
  date), one per day, a uniform second in 19:00:00-22:00:00 (the reference's rule);
- qas: answer choices are every distinct tuple of the question's types over all checkpoint
  states, padded with random unseen tuples up to ``min_state_variants``; ``type`` experience
  if the tuple occurs at some checkpoint, else random. The answer is advice made of one fragment
  per type value; it names no value, and choices differ in at least one fragment.

Departures from the reference's file: the choice order is a seeded shuffle (the reference's is
set order, not reproducible), and ``update_cnts`` counts changes up to each period (the
reference writes the final totals into every period).
"""

from __future__ import annotations

import calendar
import itertools
import json
import random
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemoflow import amemgym_world as world
from mnemoflow.data.jsonstream import iter_jsonl
from mnemoflow.data.validate import DataError
from mnemoflow.grouping import shuffled_groups

#: The shipped templates and persona pool (the repository's ``data/`` folder).
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
PERSONAS = DATA_DIR / "amemgym_personas.jsonl"
TOPICS = world.TOPICS

#: Knobs, named after the reference's config (v1.base values where they apply).
DEFAULTS: dict[str, Any] = {
    "users": 4,
    "periods": 3,  # update periods; data.json holds periods + 1 (period 0 is the initial state)
    "seed": 0,
    "questions": 10,
    "start_date": "2020-10-01",
    "months_per_period": 3,
    "changes_per_period": 4,
    "max_changes_per_state": 3,
    "min_state_variants": 4,
}

PROFILE_KEYS = (
    "name",
    "age",
    "gender",
    "marital_status",
    "education_level",
    "occupation",
    "hobbies_and_interests",
    "skills_and_expertise",
    "complementary_info",
)


def formatted_profile(profile: dict[str, Any]) -> str:
    """The reference's ``formatted_str`` of a user profile: a "key: value" line per
    :data:`PROFILE_KEYS`, in that order."""
    return "\n".join(f"{key}: {profile[key]}" for key in PROFILE_KEYS)


def read_personas(path: str | Path = PERSONAS) -> list[dict[str, Any]]:
    """The persona pool: one JSON object per line with every key of :data:`PROFILE_KEYS`."""
    path = Path(path)
    personas = []
    for number, persona in iter_jsonl(path):
        if not isinstance(persona, dict):
            raise DataError(f"{path}: line {number}: expected a JSON object")
        missing = [key for key in PROFILE_KEYS if key not in persona]
        if missing:
            raise DataError(f"{path}: line {number}: missing field '{missing[0]}'")
        personas.append(persona)
    return personas


def generate(params: dict[str, Any] | None = None, personas: str | Path = PERSONAS) -> list[dict]:
    """The users of a ``data.json`` (a list, as the reference writes it)."""
    p = {**DEFAULTS, **(params or {})}
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        raise DataError(f"amemgym generator: unknown parameters {unknown}")
    topics = world.topics()
    pool = read_personas(personas)
    if not 1 <= p["users"] <= len(pool):
        raise DataError(f"amemgym generator: users must be 1..{len(pool)} (the persona pool)")
    if p["periods"] < 0:
        raise DataError("amemgym generator: periods must be >= 0")
    if not 1 <= p["questions"] <= len(topics["questions"]):
        raise DataError(f"amemgym generator: questions must be 1..{len(topics['questions'])}")
    start = _date(p["start_date"])
    order = list(range(len(pool)))
    random.Random(f"amemgym-personas:{p['seed']}").shuffle(order)  # users are a prefix
    return [
        _user(pool[order[u]], random.Random(f"amemgym-user:{p['seed']}:{u}"), start, p, topics)
        for u in range(p["users"])
    ]


def write_data(users: list[dict], out_dir: str | Path) -> Path:
    """``out_dir/data.json``, written atomically; equal seeds give equal bytes."""
    from mnemoflow.data.tables import write_atomic_text

    text = json.dumps(users, ensure_ascii=False, indent=2) + "\n"
    return write_atomic_text(Path(out_dir) / "data.json", text)


def _date(text: str) -> date:
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise DataError(f"amemgym generator: start_date must be YYYY-MM-DD, got {text!r}") from None


def plus_months(day: date, months: int) -> date:
    """``day`` moved by whole months, the day clamped to the month's end (the reference's rule)."""
    month0 = day.month - 1 + months
    year, month = day.year + month0 // 12, month0 % 12 + 1
    return day.replace(
        year=year, month=month, day=min(day.day, calendar.monthrange(year, month)[1])
    )


def session_times(rng: random.Random, end: date, n: int) -> list[str]:
    """The reference's rule: the last ``n`` days up to ``end``, one each, 19:00:00-22:00:00."""
    days = sorted(end - timedelta(days=i) for i in range(n))
    return [
        (
            datetime.combine(day, datetime.min.time())
            + timedelta(seconds=rng.randint(19 * 3600, 22 * 3600))
        ).strftime("%Y-%m-%d %H:%M:%S")
        for day in days
    ]


def _profile(persona: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    profile = {"uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4))}
    profile |= {key: persona[key] for key in PROFILE_KEYS}
    profile["formatted_str"] = formatted_profile(profile)
    return profile


def _label(name: str) -> str:
    return name.replace("_", " ")


def _initial(rng: random.Random, schema: dict[str, list[str]]) -> dict[str, str]:
    state = {}
    for name, choices in schema.items():
        middle = choices[len(choices) // 2]
        state[name] = middle if rng.random() < 0.5 else rng.choice(choices)
    return state


def _changes(rng: random.Random, state, schema, counts, p) -> dict[str, str]:
    """One period's updates: n-1..n+1 types, the less-changed first, each to a new value."""
    n, types = p["changes_per_period"], len(schema)
    low = max(1, min(n - 1, types))  # clamped to the schema: fewer types than n - 1 change all
    k = rng.randint(low, max(low, min(n + 1, types)))
    names = sorted(schema)
    rng.shuffle(names)
    names.sort(key=lambda name: counts[name] >= p["max_changes_per_state"])
    chosen = names[:k]
    return {
        name: rng.choice([v for v in schema[name] if v != state[name]])
        for name in sorted(chosen, key=names.index)
    }


def _user(persona, rng: random.Random, start: date, p: dict[str, Any], topics) -> dict[str, Any]:
    types = topics["types"]
    profile = _profile(persona, rng)
    first_name = str(persona["name"]).split()[0]
    questions = rng.sample(topics["questions"], p["questions"])
    schema: dict[str, list[str]] = {}
    for question in questions:
        for name in question["required_info"]:
            schema.setdefault(name, list(types[name]["choices"]))
    state = _initial(rng, schema)
    counts = dict.fromkeys(schema, 0)
    sessions = [
        {"event": None, "exposed_states": exposed, "query": world.query(exposed)}
        for group in shuffled_groups(rng, list(schema), 3)
        for exposed in [{name: state[name] for name in group}]
    ]
    for session, when in zip(sessions, session_times(rng, start, len(sessions)), strict=True):
        session.update(messages=[], session_time=when)
    periods = [
        {
            "period_start": None,
            "period_end": start.isoformat(),
            "period_summary": None,
            "sessions": sessions,
            "state": dict(state),
            "updates": {name: {"old": None, "new": value} for name, value in state.items()},
            "update_cnts": dict(counts),
        }
    ]
    for k in range(1, p["periods"] + 1):
        begin = plus_months(start, p["months_per_period"] * (k - 1))
        end = plus_months(start, p["months_per_period"] * k)
        new = _changes(rng, state, schema, counts, p)
        updates = {name: {"old": state[name], "new": value} for name, value in new.items()}
        state = state | new
        for name in new:
            counts[name] += 1
        sessions = []
        for group in shuffled_groups(rng, list(new), 2):
            exposed = {name: new[name] for name in group}
            event = "; ".join(
                f"{first_name}'s {_label(name)} changed from {updates[name]['old']} to {value}"
                for name, value in exposed.items()
            )
            query = world.query(exposed, "Quick update on my side. ")
            sessions.append({"event": event + ".", "exposed_states": exposed, "query": query})
        for session, when in zip(sessions, session_times(rng, end, len(sessions)), strict=True):
            session.update(messages=[], session_time=when)
        summary = (
            f"Between {begin.isoformat()} and {end.isoformat()}, {first_name}'s "
            + ", ".join(_label(name) for name in new)
            + " changed."
        )
        periods.append(
            {
                "period_start": begin.isoformat(),
                "period_end": end.isoformat(),
                "period_summary": summary,
                "sessions": sessions,
                "state": dict(state),
                "updates": updates,
                "update_cnts": dict(counts),
            }
        )
    states = [period["state"] for period in periods]
    qas = [_qa(rng, question, schema, states, types, p) for question in questions]
    return {
        "id": profile["uuid"],
        "start_time": start.isoformat(),
        "user_profile": profile,
        "state_schema": schema,
        "periods": periods,
        "qas": qas,
    }


def state_variants(
    rng: random.Random,
    required: list[str],
    schema: dict[str, list[str]],
    states: list[dict[str, str]],
    minimum: int,
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """A question's answer variants in a seeded order, and the ones some checkpoint state has.

    Every distinct tuple of ``required`` over ``states`` (each once), padded with random unseen
    tuples up to ``minimum`` (fewer if the schema has no more), then shuffled.
    """
    seen: list[tuple[str, ...]] = []
    for state in states:
        variant = tuple(state[name] for name in required)
        if variant not in seen:
            seen.append(variant)
    variants = list(seen)
    if len(variants) < minimum:
        unseen = [v for v in itertools.product(*(schema[n] for n in required)) if v not in seen]
        variants += rng.sample(unseen, min(len(unseen), minimum - len(variants)))
    rng.shuffle(variants)
    return variants, seen


def _qa(rng, question, schema, states, types, p) -> dict[str, Any]:
    required = list(question["required_info"])
    variants, seen = state_variants(rng, required, schema, states, p["min_state_variants"])
    return {
        "query": question["query"],
        "required_info": required,
        "answer_choices": [
            {
                "state": list(variant),
                "answer": world.advice(required, schema, list(variant)),
                "type": "experience" if variant in seen else "random",
            }
            for variant in variants
        ],
    }
