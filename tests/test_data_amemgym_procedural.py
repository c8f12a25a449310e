"""The procedural AMemGym generator: reference schema, the reference's generation rules, seeds."""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml

from mnemoflow import cli
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.amemgym_procedural import PROFILE_KEYS, generate, plus_months, read_personas
from mnemoflow.data.validate import DataError

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "amemgym_data.schema.yaml"


def cli_generate(out, *extra):
    args = ["generate", "amemgym", "--out", str(out), *extra]
    assert cli.main(args) == 0
    return out / "data.json"


@pytest.fixture(scope="module")
def users():
    return generate({"users": 3, "periods": 4, "seed": 5})


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = cli_generate(tmp_path / "a", "--users", "2", "--periods", "3", "--seed", "11")
    b = cli_generate(tmp_path / "b", "--users", "2", "--periods", "3", "--seed", "11")
    c = cli_generate(tmp_path / "c", "--users", "2", "--periods", "3", "--seed", "12")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    # fewer users are a prefix of more: user u does not depend on how many are asked for
    more = generate({"users": 3, "periods": 3, "seed": 11})
    assert json.loads(a.read_text()) == more[:2]


def test_generated_file_validates_against_the_reference_schema_and_loads(tmp_path):
    path = cli_generate(tmp_path, "--users", "3", "--periods", "2", "--seed", "1")
    data = json.loads(path.read_text())
    jsonschema.validate(data, yaml.safe_load(SCHEMA.read_text()))
    loaded = read_environment(path)
    assert [len(u.periods) for u in loaded] == [3, 3, 3]
    assert [len(u.questions) for u in loaded] == [10, 10, 10]
    # the schema rejects what the reference would not write
    data[0]["qas"][0]["answer_choices"][0]["type"] = "correct"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, yaml.safe_load(SCHEMA.read_text()))


def test_profile_is_a_pool_persona_formatted_as_the_reference_does(users):
    pool = {p["name"]: p for p in read_personas()}
    assert len(pool) == 48
    profile = users[0]["user_profile"]
    assert users[0]["id"] == profile["uuid"]
    persona = pool[profile["name"]]
    assert profile["formatted_str"].splitlines()[:2] == [
        f"name: {persona['name']}",
        f"age: {persona['age']}",
    ]
    assert profile["formatted_str"].splitlines()[-1].startswith("complementary_info: ")
    assert len({u["user_profile"]["name"] for u in users}) == 3


def test_periods_dates_and_state_updates_follow_the_reference(users):
    for user in users:
        periods = user["periods"]
        schema = user["state_schema"]
        assert all(len(choices) == 3 for choices in schema.values())
        assert periods[0]["period_start"] is None and periods[0]["period_end"] == "2020-10-01"
        assert [p["period_end"] for p in periods[1:]] == [
            "2021-01-01",
            "2021-04-01",
            "2021-07-01",
            "2021-10-01",
        ]
        assert set(periods[0]["updates"]) == set(schema)
        for k in range(1, len(periods)):
            before, now = periods[k - 1]["state"], periods[k]["state"]
            updates = periods[k]["updates"]
            assert 3 <= len(updates) <= 5  # changes_per_period 4, +-1
            changed = {name for name in schema if before[name] != now[name]}
            assert changed == set(updates)
            for name, change in updates.items():
                assert change == {"old": before[name], "new": now[name]}
                assert now[name] in schema[name]
            # update_cnts: changes up to this period (the reference writes final totals)
            counts = periods[k]["update_cnts"]
            assert counts == {
                name: sum(name in periods[i]["updates"] for i in range(1, k + 1)) for name in schema
            }


def test_session_times_are_the_last_days_up_to_the_period_end_in_the_evening(users):
    for user in users:
        for period in user["periods"]:
            times = [datetime.fromisoformat(s["session_time"]) for s in period["sessions"]]
            end = datetime.fromisoformat(period["period_end"])
            n = len(times)
            assert [t.date() for t in times] == [
                (end - timedelta(days=n - 1 - i)).date() for i in range(n)
            ]
            assert all(
                19 * 3600 <= t.hour * 3600 + t.minute * 60 + t.second <= 22 * 3600 for t in times
            )


def _named(text, value):
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE)


def test_queries_expose_exactly_the_intended_values(users):
    for user in users:
        schema = user["state_schema"]
        periods = user["periods"]
        covered = set()
        for k, period in enumerate(periods):
            exposed_in_period = {}
            for session in period["sessions"]:
                exposed = session["exposed_states"]
                assert 1 <= len(exposed) <= (3 if k == 0 else 2)
                for name, choices in schema.items():
                    named = [c for c in choices if _named(session["query"], c)]
                    assert named == ([exposed[name]] if name in exposed else []), (name, session)
                exposed_in_period |= exposed
                covered |= set(exposed)
            if k == 0:  # period 0 reveals the whole initial state
                assert exposed_in_period == period["state"]
            else:  # an update period reveals exactly its new values
                assert exposed_in_period == {n: c["new"] for n, c in period["updates"].items()}
                assert all(s["event"] for s in period["sessions"])
        assert covered == set(schema)


def test_answer_choices_cover_every_checkpoint_state_and_name_no_value(users):
    for user in users:
        schema = user["state_schema"]
        states = [p["state"] for p in user["periods"]]
        for qa in user["qas"]:
            required = qa["required_info"]
            assert len(required) == 2 and set(required) <= set(schema)
            seen = {tuple(s[name] for name in required) for s in states}
            tuples = [tuple(c["state"]) for c in qa["answer_choices"]]
            assert len(set(tuples)) == len(tuples) == max(4, len(seen))
            assert seen <= set(tuples)
            assert set(tuples) <= set(itertools.product(*(schema[n] for n in required)))
            for choice in qa["answer_choices"]:
                assert choice["type"] == (
                    "experience" if tuple(choice["state"]) in seen else "random"
                )
                for name in required:
                    assert not any(_named(choice["answer"], v) for v in schema[name]), choice
            texts = [c["answer"] for c in qa["answer_choices"]]
            assert len(set(texts)) == len(texts)


def test_choice_order_is_seeded_not_always_the_first_state(users):
    firsts = [
        qa["answer_choices"][0]["state"]
        == [user["periods"][0]["state"][n] for n in qa["required_info"]]
        for user in users
        for qa in user["qas"]
    ]
    assert 0 < sum(firsts) < len(firsts)


def test_plus_months_clamps_the_day():
    assert plus_months(datetime(2021, 1, 31).date(), 1).isoformat() == "2021-02-28"
    assert plus_months(datetime(2020, 11, 30).date(), 3).isoformat() == "2021-02-28"
    assert plus_months(datetime(2020, 10, 1).date(), 15).isoformat() == "2022-01-01"


def test_bad_parameters_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match=r"^amemgym generator: users must be 1\.\.48"):
        generate({"users": 49})
    with pytest.raises(DataError, match=r"^amemgym generator: start_date must be YYYY-MM-DD"):
        generate({"start_date": "1 Oct 2020"})
    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"name": "A"}\n')
    with pytest.raises(DataError) as info:
        generate({"users": 1}, personas=pool)
    assert str(info.value) == f"{pool}: line 1: missing field 'age'"
    # a line that is JSON but no object: one line too, never a TypeError (a number) or a text
    # whose substrings pass for the fields
    for line in ("7", json.dumps(" ".join(PROFILE_KEYS))):
        pool.write_text(line + "\n")
        with pytest.raises(DataError) as info:
            generate({"users": 1}, personas=pool)
        assert str(info.value) == f"{pool}: line 1: expected a JSON object"


def test_generated_file_loads_as_unified_tables(tmp_path):
    from mnemoflow.data.registry import load_benchmark, n_steps
    from mnemoflow.data.tables import QUESTIONS, to_arrow

    path = cli_generate(tmp_path, "--users", "2", "--periods", "2", "--questions", "4")
    spec = {"loader": "amemgym", "source": {"path": str(path)}}
    assert n_steps(spec) == 3
    questions = load_benchmark(spec).questions
    to_arrow(questions, QUESTIONS)
    assert len(questions) == 2 * 3 * 4  # users x checkpoints x questions
    for _, row in questions.iterrows():
        meta = json.loads(row["meta"])
        assert meta["option_states"][row["gold_option"]] == meta["gold_state"]


def test_fewer_types_than_changes_per_period_change_every_type():
    # One question = two types; a period asks for n - 1 = 3 .. 5 changes, so each update period
    # changes both types (the reference's range clamped to the schema; it used to crash).
    [user] = generate({"users": 1, "periods": 3, "questions": 1})
    assert len(user["state_schema"]) == 2
    assert [len(period["updates"]) for period in user["periods"][1:]] == [2, 2, 2]
