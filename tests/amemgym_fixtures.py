"""A tiny AMemGym environment in the reference data.json schema (amemgym.md §1), for loop tests.

Two users, three periods (0 = initial), two sessions per period whose first query states the
user's diet or city in the first person, two questions each.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mnemoflow.data.amemgym import gold_choice
from tests.workflow import workdir

DIETS = ["vegan", "keto", "paleo"]
CITIES = ["Lisbon", "Osaka", "Denver"]


def _session(day: str, text: str, exposed: dict[str, str]) -> dict:
    return {
        "event": None,
        "exposed_states": exposed,
        "query": text,
        "messages": [],
        "session_time": f"{day} 19:30:00",
    }


def user(uid: str, diets: list[str], cities: list[str]) -> dict:
    periods = []
    for p, (diet, city) in enumerate(zip(diets, cities, strict=True)):
        end = f"2024-0{p + 1}-28"
        previous = (diets[p - 1], cities[p - 1]) if p else (None, None)
        updates = {
            var: {"old": old, "new": new}
            for var, old, new in (("diet", previous[0], diet), ("city", previous[1], city))
            if old != new
        }
        periods.append(
            {
                "period_start": None if p == 0 else f"2024-0{p}-28",
                "period_end": end,
                "period_summary": None,
                "sessions": [
                    _session(
                        f"2024-0{p + 1}-26",
                        f"My diet is {diet} now. What should I cook this week?",
                        {"diet": diet},
                    ),
                    _session(
                        f"2024-0{p + 1}-27",
                        f"My city is {city} these days. Where could I go running?",
                        {"city": city},
                    ),
                ],
                "state": {"diet": diet, "city": city},
                "updates": updates,
                "update_cnts": {},
            }
        )
    qas = [
        {
            "query": "What should I cook for dinner?",
            "required_info": ["diet"],
            "answer_choices": [
                {"state": [d], "answer": f"A {d} recipe", "type": "experience"} for d in DIETS
            ]
            + [{"state": ["raw"], "answer": "A raw food salad", "type": "random"}],
        },
        {
            "query": "Where should I train on weekends?",
            "required_info": ["city", "diet"],
            "answer_choices": [
                {"state": [c, d], "answer": f"A {c} trail with {d} snacks", "type": "experience"}
                for c, d in zip(cities, diets, strict=True)
            ]
            + [{"state": ["Paris", "vegan"], "answer": "A Paris park", "type": "random"}],
        },
    ]
    return {
        "id": uid,
        "start_time": "2024-01-28",
        "user_profile": {
            "uuid": uid,
            "name": uid,
            "formatted_str": f"name: {uid}\noccupation: teacher",
        },
        "state_schema": {"diet": DIETS + ["raw"], "city": CITIES + ["Paris"]},
        "periods": periods,
        "qas": qas,
    }


def environment() -> list[dict]:
    return [
        user("ana", ["vegan", "keto", "keto"], ["Lisbon", "Lisbon", "Osaka"]),
        user("ben", ["paleo", "paleo", "vegan"], ["Denver", "Osaka", "Osaka"]),
    ]


def write_environment(folder: Path) -> Path:
    path = Path(folder) / "data.json"
    path.write_text(json.dumps(environment(), indent=1))
    return path


def write_one_user(folder: Path) -> Path:
    """The first user of :func:`environment` with periods 0 and 1 only, as ``folder/data.json``."""
    user = environment()[0]
    user["periods"] = user["periods"][:2]
    path = Path(folder) / "data.json"
    path.write_text(json.dumps([user]), encoding="utf-8")
    return path


#: The benchmark entry of the environment written above (``data.json`` in the working directory):
#: AMemGym's interactive protocol in one shard; a test adds its systems and knobs.
TINY_BENCHMARK = {
    "loader": "amemgym",
    "protocols": ["interactive"],
    "source": {"path": "data.json"},
    "shards": 1,
}


def environment_workdir(tmp_path: Path, config: dict) -> tuple[Path, Path]:
    """A scratch working directory holding the environment (``data.json``) and ``config`` as its
    override layer: (the directory, the layer's path)."""
    wd = workdir(tmp_path)
    write_environment(wd)
    override = wd / "amemgym.yaml"
    override.write_text(yaml.safe_dump(config))
    return wd, override


def answer(n: int | str) -> str:
    return f'```json\n{{\n    "answer": {n}\n}}\n```'


def write_reference(folder: Path, users, wrong: set, broken: set) -> Path:
    """The reference's eval-output of one agent: ``<user>/overall_results.json`` ([period]
    [question] result records, options in data.json order) and ``overall_metrics.json``. The
    (user, period, question) in ``wrong`` pick another option; in ``broken`` give no JSON: the
    reference then picks a random option, here the gold one, so its metric says 1.0."""
    for user in users:
        results, accuracy = [], []
        for period in user.periods:
            row, values = [], []
            for q in user.questions:
                gold = gold_choice(q, period)
                key = (user.id, period.index, q.index)
                pick = (gold + 1) % len(q.choices) if key in wrong else gold
                raw = "I cannot say" if key in broken else answer(pick + 1)
                row.append(
                    {"query": q.query, "answer": gold, "raw_response": raw,
                     "response": pick + 1, "json_error": key in broken,
                     "scores": {"accuracy": float(pick == gold)}}
                )  # fmt: skip
                values.append(float(pick == gold))
            results.append(row)
            accuracy.append(values)
        (folder / user.id).mkdir(parents=True)
        (folder / user.id / "overall_results.json").write_text(json.dumps(results), "utf-8")
        (folder / user.id / "overall_metrics.json").write_text(
            json.dumps({"accuracy": accuracy}), "utf-8"
        )
    return folder
