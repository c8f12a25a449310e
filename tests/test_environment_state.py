"""The first stages of environment generation: personas, profile, questions, schema, initial state.

Validators are checked on hand-made replies, the bounded re-ask on a scripted model, and the
offline chain end to end with its counts worked out from the knobs.
"""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from mnemoflow.data.validate import DataError
from mnemoflow.environment import initial_state, profile, questions, schema
from mnemoflow.environment.base import InvalidReply, StageContext, StageFailed, StageLog
from mnemoflow.environment.personas import NEMOTRON_COLUMNS, sample_personas
from mnemoflow.llm.gateway import Gateway
from tests.scripted_backend import replies, scripted_gateway

ROLES = ("generator_high", "generator_low")
BASE = {
    "start_date": "2020-10-01",
    "num_questions": 10,
    "num_periods": 10,
    "num_months_per_period": 3,
    "num_states_per_question": 2,
    "num_choices_per_state": 3,
    "lang": "en",
    "seed": 42,
}
PROFILE_KEYS = [
    "uuid",
    "name",
    "age",
    "gender",
    "marital_status",
    "education_level",
    "occupation",
    "hobbies_and_interests",
    "skills_and_expertise",
    "complementary_info",
    "formatted_str",
]


def run_stage(module, gateway, inputs, knobs=BASE, user="u1"):
    ctx = StageContext(gateway, knobs, user, int(knobs.get("seed", 0)), StageLog(module.STAGE.name))
    return asyncio.run(module.STAGE.run(ctx, inputs)), ctx.log


def raises(validate, reply, *args, match):
    with pytest.raises(InvalidReply, match=match):
        validate(reply, *args)


# --- profile ---------------------------------------------------------------------------------


def test_profile_validator_accepts_a_name_and_a_short_summary():
    reply = {"name": " Ana Ruiz ", "profile": "Runs a bakery.", "extra": 1}
    assert profile.validate_profile(reply) == {"name": "Ana Ruiz", "profile": "Runs a bakery."}


def test_profile_validator_rejects_missing_or_empty_name_and_a_long_summary():
    raises(profile.validate_profile, {"profile": "x"}, match='"name" is missing')
    raises(profile.validate_profile, {"name": "  ", "profile": "x"}, match='"name" must be')
    raises(profile.validate_profile, ["Ana"], match="JSON object")
    long = {"name": "Ana", "profile": "word " * 500}
    raises(profile.validate_profile, long, match="has 500 words; it must have fewer than 500")
    assert profile.validate_profile({"name": "Ana", "profile": "word " * 499})["name"] == "Ana"


NEMOTRON = {
    "uuid": "n-1",
    "source": "nemotron",
    "persona": "Maria Lopez is a patient, detail-minded nurse. She loves order.",
    "professional_persona": "Maria Lopez manages night shifts at a county clinic.",
    "sports_persona": "She swims twice a week.",
    "arts_persona": "",
    "travel_persona": "Dreams of seeing Lisbon.",
    "culinary_persona": "Cooks Oaxacan dishes on Sundays.",
    "career_goals_and_ambitions": "Wants to become a nurse practitioner.",
    "skills_and_expertise": "Triage and scheduling.",
    "skills_and_expertise_list": "['triage', 'scheduling']",
    "hobbies_and_interests": "Swimming and cooking.",
    "hobbies_and_interests_list": "[]",
    "sex": "Female",
    "age": 38,
    "marital_status": "married",
    "education_level": "bachelors",
    "bachelors_field": "nursing_science",
    "occupation": "registered_nurse",
    "key": "n-1",
}


def test_profile_of_a_nemotron_persona_offline():
    result, log = run_stage(profile, Gateway.from_config({}), {"persona": NEMOTRON})
    assert list(result) == PROFILE_KEYS
    assert (result["uuid"], result["name"], result["gender"]) == ("n-1", "Maria Lopez", "Female")
    assert result["education_level"] == "bachelors (nursing science)"
    assert (result["skills_and_expertise"], result["hobbies_and_interests"]) == (
        "triage, scheduling",
        "N/A",
    )
    # the first sentence of each uncovered non-empty text, in the reference's field order
    assert result["complementary_info"] == (
        "Maria Lopez is a patient, detail-minded nurse. Maria Lopez manages night shifts at a "
        "county clinic. She swims twice a week. Dreams of seeing Lisbon. Cooks Oaxacan dishes on "
        "Sundays. Wants to become a nurse practitioner."
    )
    lines = result["formatted_str"].split("\n")
    assert len(lines) == 9
    assert lines[0] == "name: Maria Lopez"
    assert lines[4] == "education_level: bachelors (nursing science)"
    assert log.calls == 1


def test_an_empty_bachelors_field_adds_nothing():
    persona = {**NEMOTRON, "bachelors_field": ""}
    assert profile.basic_profile(persona)["education_level"] == "bachelors"


# --- questions -------------------------------------------------------------------------------


def q(text, *types):
    return {
        "question": text,
        "required_info": [{"info_type": t, "info_choices": c} for t, c in types],
    }


GOOD_QUESTIONS = {
    "questions": [
        q("How do I save?", ("budget", ["low", "mid", "high"]), ("kids", ["0", "1", "2+"])),
        q(
            "Where to travel?",
            ("budget", ["l", "m", "h"]),
            ("season", ["winter", "spring", "fall"]),
        ),
    ]
}


def test_questions_validator_returns_the_contract_shape():
    result = questions.validate_questions(GOOD_QUESTIONS, 2, 2, 3)
    assert result == [
        {
            "query": "How do I save?",
            "info_types": {"budget": ["low", "mid", "high"], "kids": ["0", "1", "2+"]},
        },
        {
            "query": "Where to travel?",
            "info_types": {"budget": ["l", "m", "h"], "season": ["winter", "spring", "fall"]},
        },
    ]


def test_questions_validator_rejects_wrong_counts_and_repeats():
    v = questions.validate_questions
    raises(v, GOOD_QUESTIONS, 3, 2, 3, match="2 questions given, exactly 3 required")
    raises(v, GOOD_QUESTIONS, 2, 3, 3, match="question 1: 2 required_info items given, exactly 3")
    raises(v, GOOD_QUESTIONS, 2, 2, 4, match="3 choices given, exactly 4 required")
    repeated = {"questions": [GOOD_QUESTIONS["questions"][0]] * 2}
    raises(v, repeated, 2, 2, 3, match="question 2 repeats an earlier question")
    same_choice = {"questions": [q("A?", ("t", ["x", "X", "y"]), ("u", ["a", "b", "c"]))]}
    raises(v, same_choice, 1, 2, 3, match="question 1, info type 't': the choices must be distinct")
    twice = {"questions": [q("A?", ("t", ["x", "y", "z"]), ("t", ["a", "b", "c"]))]}
    raises(v, twice, 1, 2, 3, match="info type 't' appears twice")
    empty_type = {"questions": [q("A?", (" ", ["x", "y", "z"]), ("u", ["a", "b", "c"]))]}
    raises(v, empty_type, 1, 2, 3, match='"info_type" must be a non-empty string')
    empty_choice = {"questions": [q("A?", ("t", ["x", "", "z"]), ("u", ["a", "b", "c"]))]}
    raises(v, empty_choice, 1, 2, 3, match="list of non-empty strings")
    raises(v, [], 1, 2, 3, match='key "questions"')


# --- schema ----------------------------------------------------------------------------------


def test_merge_validator_needs_every_original_type_exactly_once():
    originals = ["budget", "money", "kids"]
    good = {"monthly_budget": ["budget", "money"], "number_of_children": ["kids"]}
    assert schema.validate_merge(good, originals) == good
    v = schema.validate_merge
    raises(v, {"monthly_budget": ["budget", "money"]}, originals, match="'kids' is not mapped")
    raises(
        v, {"a": ["budget", "money", "kids", "pets"]}, originals, match="'pets' is not an original"
    )
    twice = {"a": ["budget", "money"], "b": ["money", "kids"]}
    raises(v, twice, originals, match="'money' is mapped to both 'a' and 'b'")
    raises(v, {"": ["budget", "money", "kids"]}, originals, match="name is empty")
    raises(v, {"a": ["budget", "money", "kids"], "b": []}, originals, match="non-empty list")


def test_unify_validator_needs_new_choices_for_every_merged_type():
    good = {"monthly_budget": ["tight", "ok", "loose"], "other": ["ignored"]}
    assert schema.validate_unified(good, ["monthly_budget"], 3) == {
        "monthly_budget": ["tight", "ok", "loose"]
    }
    v = schema.validate_unified
    raises(v, {"other": ["a", "b", "c"]}, ["monthly_budget"], 3, match="no choices given for")
    raises(
        v, {"monthly_budget": ["a", "b"]}, ["monthly_budget"], 3, match="2 choices given, exactly 3"
    )


PROFILE = {"formatted_str": "name: Ana Ruiz\nage: 30"}
TWO_QUESTIONS = questions.validate_questions(GOOD_QUESTIONS, 2, 2, 3)


def test_schema_unifies_only_types_fed_by_several_occurrences():
    merge = {
        "monthly_budget": ["budget"],
        "number_of_children": ["kids"],
        "travel_season": ["season"],
    }
    unify = {"monthly_budget": ["tight", "moderate", "comfortable"]}
    gateway, backend = scripted_gateway(replies(json.dumps(merge), json.dumps(unify)), ROLES)
    result, log = run_stage(schema, gateway, {"profile": PROFILE, "questions": TWO_QUESTIONS})
    assert result["state_schema"] == {
        "monthly_budget": ["tight", "moderate", "comfortable"],  # budget occurs in both questions
        "number_of_children": ["0", "1", "2+"],  # one occurrence: its own choices
        "travel_season": ["winter", "spring", "fall"],
    }
    assert result["questions"] == [
        {"query": "How do I save?", "required_info": ["monthly_budget", "number_of_children"]},
        {"query": "Where to travel?", "required_info": ["monthly_budget", "travel_season"]},
    ]
    assert result["merged"] == merge
    assert [r.task for r in backend.requests] == ["env-merge-types", "env-unify-choices"]
    assert list(backend.requests[1].fields["groups"]) == ["monthly_budget"]
    assert (log.calls, log.asks) == (2, 2)


def test_schema_without_merged_types_asks_once():
    one = [{"query": "A?", "info_types": {"t": ["x", "y", "z"], "u": ["a", "b", "c"]}}]
    gateway, backend = scripted_gateway(replies(json.dumps({"T": ["t"], "U": ["u"]})), ROLES)
    result, _ = run_stage(schema, gateway, {"profile": PROFILE, "questions": one})
    assert result["state_schema"] == {"T": ["x", "y", "z"], "U": ["a", "b", "c"]}
    assert len(backend.requests) == 1


# --- initial state and the bounded re-ask ----------------------------------------------------

SCHEMA = {"state_schema": {"budget": ["low", "mid", "high"], "kids": ["0", "1", "2+"]}}


def test_initial_state_validator():
    s = SCHEMA["state_schema"]
    v = initial_state.validate_initial_state
    assert v({"kids": "1", "budget": "mid"}, s) == {"budget": "mid", "kids": "1"}
    raises(v, {"budget": "mid"}, s, match="state variable 'kids' is missing")
    raises(v, {"budget": "huge", "kids": "1"}, s, match="'huge' is not a valid value of 'budget'")
    raises(
        v, {"budget": "mid", "kids": "1", "pets": "dog"}, s, match="'pets' is not a state variable"
    )


def test_an_invalid_reply_is_asked_again_with_its_error():
    bad, good = json.dumps({"budget": "mid"}), json.dumps({"budget": "mid", "kids": "0"})
    gateway, backend = scripted_gateway(replies(bad, good), ROLES)
    result, log = run_stage(initial_state, gateway, {"profile": PROFILE, "schema": SCHEMA})
    assert result == {"budget": "mid", "kids": "0"}
    assert (len(backend.requests), log.calls) == (2, 2)
    second = backend.requests[1].messages
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == bad
    assert "state variable 'kids' is missing" in second[2]["content"]
    assert backend.requests[1].fields["errors"] == ["state variable 'kids' is missing"]
    assert log.validation_failures == ["env-initial-state: state variable 'kids' is missing"]


def test_four_invalid_replies_fail_the_stage():
    gateway, backend = scripted_gateway(replies(json.dumps({"budget": "huge"})), ROLES)
    with pytest.raises(StageFailed, match="stage initial_state: env-initial-state") as failed:
        run_stage(initial_state, gateway, {"profile": PROFILE, "schema": SCHEMA})
    assert failed.value.stage == "initial_state"
    assert "(4 invalid replies)" in failed.value.reason
    assert len(backend.requests) == 4


def test_max_validation_errors_knob_bounds_the_asks():
    gateway, backend = scripted_gateway(replies(json.dumps({"budget": "huge"})), ROLES)
    with pytest.raises(StageFailed):
        run_stage(
            initial_state,
            gateway,
            {"profile": PROFILE, "schema": SCHEMA},
            knobs={**BASE, "max_validation_errors": 2},
        )
    assert len(backend.requests) == 2


# --- the offline chain -----------------------------------------------------------------------


def offline_chain(knobs, persona):
    gateway = Gateway.from_config({})
    inputs = {"persona": persona}
    for module in (profile, questions, schema, initial_state):
        inputs[module.STAGE.name], _ = run_stage(module, gateway, inputs, knobs, persona["key"])
    return inputs


@pytest.mark.parametrize("states", [2, 3])
def test_the_offline_chain_meets_the_contract(states):
    knobs = {**BASE, "num_states_per_question": states}
    persona = sample_personas(None, 1, seed=42)[0]
    out = offline_chain(knobs, persona)
    assert list(out["profile"]) == PROFILE_KEYS
    assert out["profile"]["name"] == persona["name"]
    assert out["profile"]["complementary_info"] == persona["complementary_info"]
    # 10 questions x `states` types x 3 choices
    assert len(out["questions"]) == 10
    assert {len(item["info_types"]) for item in out["questions"]} == {states}
    assert {len(c) for item in out["questions"] for c in item["info_types"].values()} == {3}
    assert len({item["query"] for item in out["questions"]}) == 10
    # offline merge keeps the (already normalized) template names: one variable per distinct type
    distinct = {t for item in out["questions"] for t in item["info_types"]}
    state_schema = out["schema"]["state_schema"]
    assert set(state_schema) == distinct
    assert len(state_schema) <= 10 * states
    assert all(len(set(c)) == 3 for c in state_schema.values())
    assert [len(item["required_info"]) for item in out["schema"]["questions"]] == [states] * 10
    assert all(
        t in state_schema for item in out["schema"]["questions"] for t in item["required_info"]
    )
    assert list(out["initial_state"]) == list(state_schema)
    assert all(out["initial_state"][t] in state_schema[t] for t in state_schema)
    assert offline_chain(knobs, persona) == out  # deterministic


def test_offline_questions_cannot_invent_a_fourth_choice():
    persona = sample_personas(None, 1, seed=1)[0]
    gateway = Gateway.from_config({})
    inputs = {"persona": persona}
    inputs["profile"], _ = run_stage(profile, gateway, inputs)
    with pytest.raises(StageFailed, match="3 choices given, exactly 4 required"):
        run_stage(questions, gateway, inputs, {**BASE, "num_choices_per_state": 4})


def test_offline_questions_past_the_templates_pair_new_types():
    persona = sample_personas(None, 1, seed=1)[0]
    gateway = Gateway.from_config({})
    inputs = {"persona": persona}
    inputs["profile"], _ = run_stage(profile, gateway, inputs)
    result, _ = run_stage(questions, gateway, inputs, {**BASE, "num_questions": 20})
    assert len({item["query"] for item in result}) == 20  # 18 templates + 2 composed
    composed = [item for item in result if item["query"].startswith("How should I plan around")]
    assert len(composed) == 2


def test_offline_merge_groups_names_equal_up_to_case_and_separators():
    from mnemoflow.llm.offline.environment_state import env_merge_types

    merged = json.loads(env_merge_types({"types": ["Monthly Budget", "monthly_budget", "kids"]}))
    assert merged == {"monthly_budget": ["Monthly Budget", "monthly_budget"], "kids": ["kids"]}


def test_offline_initial_state_prefers_the_middle_choice():
    from mnemoflow.llm.offline.environment_state import env_initial_state

    names = [f"v{i}" for i in range(300)]
    fields = {"user": "u", "seed": 3, "schema": {n: ["low", "mid", "high"] for n in names}}
    state = json.loads(env_initial_state(fields))
    share = sum(v == "mid" for v in state.values()) / 300
    assert 0.5 <= share <= 0.7  # weights 1, 3, 1: 3/5 = 0.6 expected
    assert {"low", "high"} <= set(state.values())


# --- personas --------------------------------------------------------------------------------


def write_parquet(path, rows=6, drop=()):
    records = []
    for i in range(rows):
        record = {column: f"{column} {i}" for column in NEMOTRON_COLUMNS}
        record |= {"uuid": f"id-{i}", "age": 20 + i, "hobbies_and_interests_list": "['a']"}
        records.append({k: v for k, v in record.items() if k not in drop})
    pd.DataFrame(records).to_parquet(path)
    return path


def test_parquet_personas_are_the_pandas_draw(tmp_path):
    path = write_parquet(tmp_path / "p.parquet")
    drawn = sample_personas(str(path), 3, seed=7)
    expected = pd.read_parquet(path).sample(n=3, random_state=7)["uuid"].tolist()
    assert [p["key"] for p in drawn] == expected
    assert [p["uuid"] for p in drawn] == expected
    assert sample_personas(str(path), 3, seed=7) == drawn
    assert isinstance(drawn[0]["age"], int)
    json.dumps(drawn)  # records are JSON-serializable


def test_parquet_exclude_ids_are_never_drawn(tmp_path):
    path = write_parquet(tmp_path / "p.parquet")
    drawn = sample_personas(str(path), 4, seed=7, exclude_ids=["id-0", "id-1"])
    frame = pd.read_parquet(path)
    expected = frame[~frame["uuid"].isin(["id-0", "id-1"])].sample(n=4, random_state=7)
    assert [p["key"] for p in drawn] == expected["uuid"].tolist()
    assert sorted(p["key"] for p in drawn) == ["id-2", "id-3", "id-4", "id-5"]


def test_parquet_problems_are_one_line_errors(tmp_path):
    path = write_parquet(tmp_path / "p.parquet", drop=("occupation",))
    with pytest.raises(DataError) as error:
        sample_personas(str(path), 2, seed=0)
    assert str(error.value) == f"{path}: missing column 'occupation' (Nemotron-Personas layout)"
    full = write_parquet(tmp_path / "q.parquet", rows=3)
    with pytest.raises(
        DataError, match=r"q.parquet: 2 personas after excluding 1 ids, 3 requested"
    ):
        sample_personas(str(full), 3, seed=0, exclude_ids=["id-1"])
    with pytest.raises(DataError, match="persona file not found"):
        sample_personas(str(tmp_path / "none.parquet"), 1, seed=0)


def test_pool_personas_are_seeded_with_stable_keys():
    first = sample_personas(None, 5, seed=11)
    assert sample_personas(None, 5, seed=11) == first
    assert len({p["key"] for p in first}) == 5
    again = sample_personas(None, 48, seed=0)
    key_of = {p["name"]: p["key"] for p in again}
    assert all(key_of[p["name"]] == p["key"] for p in first)
    rest = sample_personas(None, 3, seed=11, exclude_ids=[first[0]["key"]])
    assert first[0]["key"] not in {p["key"] for p in rest}
    with pytest.raises(DataError, match="47 personas after excluding 1 ids, 48 requested"):
        sample_personas(None, 48, seed=0, exclude_ids=[first[0]["key"]])
