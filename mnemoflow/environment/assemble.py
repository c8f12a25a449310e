"""The stages' outputs as one user of the reference's ``data.json`` (no model involved).

What the stages return is described in docs/environment.md; this module adds what the reference's
``convert_raw_data`` adds: the ids, ``start_time``, period 0 (the initial state, every variable an
update from ``null``, its sessions the period-0 queries with no event), each session's
``messages`` (``[]``: dialogues are generated at evaluation time) and ``session_time`` (the
reference's rule, shared with the procedural generator), and ``update_cnts``.

``update_cnts`` counts each variable's changes up to and including the period (period 0: all
zeros), as the procedural generator does; the reference writes the final totals into every
period. Nothing in the evaluation reads it; counting up to the period is the value a reader of
one period can use (the generator's own "prioritise variables changed fewer than
``max_changes_per_state`` times" is that count), and the final totals are the last period's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from mnemoflow.data.amemgym_procedural import session_times

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "amemgym_data.schema.yaml"


def _sessions(queries: list[dict[str, Any]], end: str, rng: random.Random) -> list[dict]:
    times = session_times(rng, date.fromisoformat(end), len(queries))
    return [
        {
            "event": query.get("event"),
            "exposed_states": dict(query["exposed_states"]),
            "query": query["query"],
            "messages": [],
            "session_time": when,
        }
        for query, when in zip(queries, times, strict=True)
    ]


def assemble_user(outputs: Mapping[str, Any], knobs: Mapping[str, Any], seed: int) -> dict:
    """The data.json user from the outputs of every stage (``outputs[stage name]``)."""
    profile = outputs["profile"]
    start = str(knobs["start_date"])
    initial = dict(outputs["initial_state"])
    queries = outputs["queries"]
    updates = outputs["periods"]
    if len(queries) != len(updates) + 1:
        raise ValueError(
            f"assemble: {len(queries)} periods of queries for {len(updates)} update periods + 1"
        )
    rng = random.Random(f"session-times:{seed}:{profile['uuid']}")
    counts = dict.fromkeys(initial, 0)
    periods = [
        {
            "period_start": None,
            "period_end": start,
            "period_summary": None,
            "sessions": _sessions(queries[0], start, rng),
            "state": dict(initial),
            "updates": {name: {"old": None, "new": value} for name, value in initial.items()},
            "update_cnts": dict(counts),
        }
    ]
    for period, period_queries in zip(updates, queries[1:], strict=True):
        for name in period["updates"]:
            counts[name] += 1
        periods.append(
            {
                "period_start": period["period_start"],
                "period_end": period["period_end"],
                "period_summary": period["period_summary"],
                "sessions": _sessions(period_queries, period["period_end"], rng),
                "state": dict(period["state"]),
                "updates": {
                    name: {"old": change["old"], "new": change["new"]}
                    for name, change in period["updates"].items()
                },
                "update_cnts": dict(counts),
            }
        )
    return {
        "id": profile["uuid"],
        "start_time": start,
        "user_profile": dict(profile),
        "state_schema": dict(outputs["schema"]["state_schema"]),
        "periods": periods,
        "qas": list(outputs["answers"]),
    }


def validate_data(users: list[dict[str, Any]]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``users`` is a data.json the reference reads."""
    jsonschema.validate(users, yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))


def data_text(users: list[dict[str, Any]]) -> str:
    """data.json's text, as the procedural generator writes it."""
    return json.dumps(users, ensure_ascii=False, indent=2) + "\n"
