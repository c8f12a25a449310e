"""Offline handlers of AMemGym generation's later stages (state updates, events, answers and their
checks, queries and their checks): deterministic template choices that satisfy the validators
for real.

Every handler reads only the request's ``fields`` and the world knowledge it shares with the
offline assistant (:mod:`mnemoflow.amemgym_world`). Answers are built from one advice fragment per
value (the topic templates' ``advice`` where the type and value are known, else a generic stance
by the value's position); the answer checker recovers the variant by finding those fragments in
the text, and the query checker predicts each value from the choice strings the query contains,
so a reply that does not carry its variant or values fails the check here too.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from mnemoflow import amemgym_world as world
from mnemoflow.grouping import shuffled_groups
from mnemoflow.llm.offline import handles

TOPICS = world.TOPICS
_label = world.label
fragment = world.fragment


def _advice(required: list[str], choices: dict[str, list[str]], variant: list[str]) -> str:
    return (
        world.advice(required, choices, variant) + " That combination fits where you are right now."
    )


def _query(exposed: dict[str, str], opening: str = "") -> str:
    return world.query(exposed, opening)


@handles("env-state-updates", reads=(TOPICS,))
def state_updates(fields: dict[str, Any]) -> str:
    """n-1..n+1 variables, those changed fewer than ``max_changes_per_state`` times first, each to
    a different legal value."""
    schema: dict[str, list[str]] = fields["schema"]
    state: dict[str, str] = fields["state"]
    counts: dict[str, int] = fields["update_cnts"]
    n, cap = int(fields["num_changes_per_period"]), int(fields["max_changes_per_state"])
    rng = random.Random(f"env-state-updates:{fields['seed']}:{len(fields['errors'])}")
    changeable = [name for name in sorted(schema) if len(schema[name]) > 1]
    high = min(n + 1, len(changeable))
    k = rng.randint(min(max(1, n - 1), high), high)
    rng.shuffle(changeable)
    changeable.sort(key=lambda name: (counts.get(name, 0) >= cap, counts.get(name, 0)))
    updated = {
        name: rng.choice([v for v in schema[name] if v != state[name]]) for name in changeable[:k]
    }
    summary = (
        f"Between {fields['period_start']} and {fields['period_end']}, "
        + ", ".join(_label(name) for name in updated)
        + " shifted."
    )
    return json.dumps({"period_summary": summary, "updated": updated}, ensure_ascii=False)


@handles("env-events", reads=(TOPICS,))
def events(fields: dict[str, Any]) -> str:
    """The changed variables in groups of one or two, one event each."""
    updates: dict[str, dict[str, str]] = fields["updates"]
    rng = random.Random(f"env-events:{fields['seed']}:{len(fields['errors'])}")
    out = []
    for group in shuffled_groups(rng, list(updates), 2):
        text = "; ".join(
            f"their {_label(n)} went from {updates[n]['old']} to {updates[n]['new']}" for n in group
        )
        out.append({"states": group, "event": f"Over these months {text}."})
    return json.dumps({"events": out}, ensure_ascii=False)


@handles("env-answers", reads=(TOPICS,))
def answers(fields: dict[str, Any]) -> str:
    """One answer per variant, made of the variant's fragments."""
    required, choices = fields["required_info"], fields["choices"]
    return json.dumps(
        {
            f"variant_{i}": _advice(required, choices, variant)
            for i, variant in enumerate(fields["variants"], start=1)
        },
        ensure_ascii=False,
    )


@handles("env-answer-check", reads=(TOPICS,))
def answer_check(fields: dict[str, Any]) -> str:
    """The number of the variant whose fragments the answer contains most of (first on a tie)."""
    required, choices = fields["required_info"], fields["choices"]
    answer = fields["answer"].lower()

    def found(variant: list[str]) -> int:
        return sum(
            fragment(n, choices[n], v).lower() in answer
            for n, v in zip(required, variant, strict=True)
        )

    scores = [found(variant) for variant in fields["variants"]]
    return str(scores.index(max(scores)) + 1)


@handles("env-answer-refine", reads=(TOPICS,))
def answer_refine(fields: dict[str, Any]) -> str:
    """The answer rewritten from the target variant's fragments."""
    text = _advice(fields["required_info"], fields["choices"], fields["target"])
    return json.dumps({"answer": text}, ensure_ascii=False)


@handles("env-init-queries", reads=(TOPICS,))
def init_queries(fields: dict[str, Any]) -> str:
    """Every variable, in groups of one to three, each value said in a sentence."""
    state: dict[str, str] = fields["state"]
    rng = random.Random(f"env-init-queries:{fields['seed']}:{len(fields['errors'])}")
    out = []
    for group in shuffled_groups(rng, sorted(state), 3):
        exposed = {name: state[name] for name in group}
        out.append({"exposed_states": exposed, "query": _query(exposed)})
    return json.dumps({"queries": out}, ensure_ascii=False)


@handles("env-update-queries", reads=(TOPICS,))
def update_queries(fields: dict[str, Any]) -> str:
    """One query per event, saying each of its new values."""
    queries = [
        _query({n: t["new"] for n, t in event["state_transition"].items()}, "Quick update. ")
        for event in fields["events"]
    ]
    return json.dumps({"queries": queries}, ensure_ascii=False)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@handles("env-query-check", reads=(TOPICS,))
def query_check(fields: dict[str, Any]) -> str:
    """Each variable's value predicted from the query text: the longest of its choices that occurs
    (in a sentence naming the variable when one does), else its first choice as a default."""
    query: str = fields["query"]
    sentences = [s.lower() for s in _SENTENCE_END.split(query)]
    predicted = {}
    for name, choices in fields["choices"].items():
        about = [s for s in sentences if _label(name).lower() in s] or sentences
        hits = [c for c in choices if any(c.lower() in s for s in about)]
        predicted[name] = max(hits, key=len) if hits else choices[0]
    return json.dumps(predicted, ensure_ascii=False)


@handles("env-query-refine", reads=(TOPICS,))
def query_refine(fields: dict[str, Any]) -> str:
    """The query rewritten to name each intended value next to its variable."""
    exposed: dict[str, str] = fields["exposed_states"]
    sentences = [f"As for my {_label(n)}, it's {v}." for n, v in exposed.items()]
    query = " ".join(sentences) + " " + world.request(next(iter(exposed)))
    return json.dumps({"query": query}, ensure_ascii=False)
