"""Offline handlers of AMemGym generation's first stages (profile, questions, merge and unify
types, initial state): deterministic choices from the shipped persona pool and topic templates
that satisfy the stages' validators for real."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from mnemoflow import amemgym_world as world
from mnemoflow.lexical import sentences
from mnemoflow.llm.offline import handles

#: The procedural environment's templates, the world knowledge shared with the offline assistant.
TOPICS = world.TOPICS
#: The offline summary stays well under any word limit a prompt sets.
SUMMARY_WORDS = 150
#: Persona texts the basic profile or the name already cover (not summarized again).
COVERED = ("skills_and_expertise", "hobbies_and_interests", "name")

_WORD = r"[A-ZÀ-ÖØ-Þ](?:[^\W\d_]|['\u2019-])+"  # a capitalized word, accents included (Tomás)
_NAME = re.compile(rf"({_WORD}(?:\s+{_WORD}){{1,2}})")


def _name(texts: list[str]) -> str:
    """The first run of two or three capitalized words that opens a text, else anywhere; ""."""
    for text in texts:
        match = _NAME.match(text.strip())
        if match:
            return match.group(1)
    for text in texts:
        match = _NAME.search(text)
        if match:
            return match.group(1)
    return ""


@handles("env-profile", reads=(TOPICS,))
def env_profile(fields: dict[str, Any]) -> str:
    """Fields: basic, complementary ({field: text}), max_words. The name found in the texts; the
    summary = the first sentence of each text the basic profile does not cover, cut short."""
    texts = {k: str(v) for k, v in fields["complementary"].items() if str(v).strip()}
    name = _name(list(texts.values()))
    firsts = [sentences(text)[0] for key, text in texts.items() if key not in COVERED]
    words = " ".join(s for s in firsts if s).split()
    limit = min(SUMMARY_WORDS, int(fields["max_words"]) - 1)
    summary = " ".join(words[:limit])
    return json.dumps({"name": name, "profile": summary})


def _label(name: str) -> str:
    return name.replace("_", " ")


@handles("env-questions", reads=(TOPICS,))
def env_questions(fields: dict[str, Any]) -> str:
    """Fields: user, seed, num_questions, num_states_per_question, num_choices_per_state.

    A seeded draw of the topic templates' questions, each with its template types (more drawn
    from the pool, or fewer kept, to reach ``num_states_per_question``), past the templates
    questions about two not yet paired types. Choices are the template's first
    ``num_choices_per_state``; a template has three, so more cannot be met (the stage fails).
    """
    topics = world.topics()
    types: dict[str, Any] = topics["types"]
    n_states = int(fields["num_states_per_question"])
    n_choices = int(fields["num_choices_per_state"])
    rng = random.Random(f"{fields['seed']}:{fields['user']}:questions")
    templates = rng.sample(topics["questions"], len(topics["questions"]))
    drafts = [(t["query"], list(t["required_info"])) for t in templates]
    paired = {frozenset(required) for _, required in drafts}
    names = sorted(types)
    extra = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    rng.shuffle(extra)
    for a, b in extra:
        if frozenset((a, b)) not in paired:
            drafts.append((f"How should I plan around my {_label(a)} and {_label(b)}?", [a, b]))
    questions = []
    for text, required in drafts[: int(fields["num_questions"])]:
        others = [name for name in names if name not in required]
        required = (required + rng.sample(others, max(0, n_states - len(required))))[:n_states]
        questions.append(
            {
                "question": text,
                "required_info": [
                    {"info_type": name, "info_choices": types[name]["choices"][:n_choices]}
                    for name in required
                ],
            }
        )
    return json.dumps({"questions": questions})


def _normal(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_") or name


@handles("env-merge-types", reads=(TOPICS,))
def env_merge_types(fields: dict[str, Any]) -> str:
    """Fields: types (the original names). Names equal up to case and separators are merged,
    under their normalized spelling; no two different names are taken for the same thing."""
    merged: dict[str, list[str]] = {}
    for name in fields["types"]:
        merged.setdefault(_normal(name), []).append(name)
    return json.dumps(merged)


@handles("env-unify-choices", reads=(TOPICS,))
def env_unify_choices(fields: dict[str, Any]) -> str:
    """Fields: groups ({type: [{question, choices}]}), num_choices_per_state. Each merged type
    keeps the first of its occurrences' choice lists with the right count (its template's)."""
    count = int(fields["num_choices_per_state"])
    unified = {}
    for name, occurrences in fields["groups"].items():
        fitting = [o["choices"] for o in occurrences if len(o["choices"]) == count]
        unified[name] = (fitting or [occurrences[0]["choices"]])[0]
    return json.dumps(unified)


@handles("env-initial-state", reads=(TOPICS,))
def env_initial_state(fields: dict[str, Any]) -> str:
    """Fields: user, seed, schema. A seeded draw per variable weighted towards the middle of its
    choices (weight n - |2i - (n-1)|: 1, 3, 1 for three choices), as the prompt asks."""
    state = {}
    for name, choices in fields["schema"].items():
        rng = random.Random(f"{fields['seed']}:{fields['user']}:{name}")
        n = len(choices)
        weights = [n - abs(2 * i - (n - 1)) for i in range(n)]
        state[name] = rng.choices(choices, weights=weights)[0]
    return json.dumps(state)
