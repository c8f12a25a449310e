"""AMemGym loader on a small file in the official ``v1.base/data.json`` layout."""

from __future__ import annotations

import json
import random

import pytest

from mnemoflow.data.amemgym import gold_choice, parse, read_environment, true_state
from mnemoflow.data.registry import load_benchmark, n_steps
from mnemoflow.data.tables import QUESTIONS, SESSIONS, to_arrow
from mnemoflow.data.validate import DataError


def session(time, exposed, user_text):
    return {
        "event": "chat",
        "exposed_states": exposed,
        "query": user_text,
        "messages": [
            {"role": "user", "content": f"[Current Time: {time}]\n{user_text}"},
            {"role": "assistant", "content": "Noted."},
        ],
        "session_time": time,
    }


def user(uid="u-1"):
    """One user, three periods (0 = initial); the diet changes in period 2."""
    states = [
        {"diet": "vegan", "city": "Lisbon"},
        {"diet": "vegan", "city": "Osaka"},
        {"diet": "keto", "city": "Osaka"},
    ]
    periods = []
    for p, state in enumerate(states):
        periods.append(
            {
                "period_start": f"2024-0{p + 1}-01",
                "period_end": f"2024-0{p + 1}-28",
                "period_summary": "…",
                "sessions": [
                    session(f"2024-0{p + 1}-03 10:00:00", {"diet": state["diet"]}, "About food"),
                    session(f"2024-0{p + 1}-10 18:30:00", {}, "Small talk"),
                ],
                "state": state,
                "updates": {} if p == 0 else {"diet": state["diet"]},
                "update_cnts": {},
            }
        )
    qas = [
        {
            "query": "What should I cook tonight?",
            "required_info": ["diet"],
            "answer_choices": [
                {"state": ["vegan"], "answer": "Chickpea curry", "type": "correct"},
                {"state": ["keto"], "answer": "Steak with butter", "type": "correct"},
                {"state": ["paleo"], "answer": "Grilled fish", "type": "distractor"},
            ],
        },
        {
            "query": "Where should I look for a gym?",
            "required_info": ["city", "diet"],
            "answer_choices": [
                {"state": ["Lisbon", "vegan"], "answer": "Alfama", "type": "correct"},
                {"state": ["Osaka", "vegan"], "answer": "Namba", "type": "correct"},
                {"state": ["Osaka", "keto"], "answer": "Umeda", "type": "correct"},
            ],
        },
    ]
    return {
        "id": uid,
        "start_time": "2024-01-01",
        "user_profile": {"name": "Rui", "formatted_str": "name: Rui"},
        "state_schema": {"diet": ["vegan", "keto", "paleo"], "city": ["Lisbon", "Osaka"]},
        "periods": periods,
        "qas": qas,
    }


@pytest.fixture()
def data_file(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([user("u-1"), user("u-2")]))
    return path


def test_steps_and_sessions(data_file):
    spec = {"loader": "amemgym", "source": {"path": str(data_file)}}
    assert n_steps(spec) == 3
    p = load_benchmark(spec)
    to_arrow(p.sessions, SESSIONS)
    to_arrow(p.questions, QUESTIONS)
    s = p.sessions[p.sessions["episode_id"] == "u-1"]
    assert s["step"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert s["session_id"].iloc[4] == "u-1_p1_s0"
    assert s["turn_id"].iloc[:2].tolist() == ["u-1_p0_s0_1", "u-1_p0_s0_2"]
    assert s["session_time"].iloc[0] == "2024-01-03T10:00"
    assert s["speaker"].iloc[:2].tolist() == ["Rui", "assistant"]
    # the user turn of a session that exposes a state is evidence; small talk is not
    assert s["has_evidence"].tolist()[:4] == [True, False, False, False]


def test_gold_option_per_period(data_file):
    q = parse(data_file, seed=0).questions
    # 2 users x 2 qas x 3 periods: every qa at every checkpoint
    assert len(q) == 2 * 2 * 3
    cook = q[(q["episode_id"] == "u-1") & q["question_id"].str.endswith("_q0")]
    assert cook["checkpoint"].tolist() == [0, 1, 2]
    assert cook["answer"].tolist() == ["Chickpea curry", "Chickpea curry", "Steak with butter"]
    for _, row in cook.iterrows():
        assert row["options"][row["gold_option"]] == row["answer"]
    # options are in a seeded order that is the same at every period
    order = list(range(3))
    random.Random("0:u-1:0").shuffle(order)
    texts = ["Chickpea curry", "Steak with butter", "Grilled fish"]
    assert [list(o) for o in cook["options"]] == [[texts[i] for i in order]] * 3
    meta = json.loads(cook["meta"].iloc[2])
    assert meta["gold_state"] == ["keto"] and meta["original_index"] == order
    assert meta["state"] == {"diet": "keto", "city": "Osaka"}
    # evidence: sessions up to the checkpoint that expose the diet
    assert list(cook["evidence_ids"].iloc[1]) == ["u-1_p0_s0", "u-1_p1_s0"]
    assert cook["question_time"].iloc[0] == "2024-01-28T00:00"


def _write(tmp_path, record):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([record]))
    return path


def _error(tmp_path, record):
    with pytest.raises(DataError) as info:
        read_environment(_write(tmp_path, record))
    return str(info.value)


def test_checkpoint_state_without_a_choice_is_a_one_line_error(tmp_path):
    record = user()
    del record["qas"][1]["answer_choices"][2]  # no gym answer for (Osaka, keto) any more
    assert _error(tmp_path, record) == (
        "data.json: record 0 (u-1) periods[2] qas[1].answer_choices: no choice has 'state' "
        "['Osaka', 'keto'] (periods[2].state on required_info ['city', 'diet'])"
    )
    with pytest.raises(DataError):  # the unified-table loader reads through read_environment
        parse(_write(tmp_path, record))


def test_required_type_missing_from_the_schema_is_a_one_line_error(tmp_path):
    record = user()
    del record["state_schema"]["city"]
    assert _error(tmp_path, record) == (
        "data.json: record 0 (u-1) qas[1].required_info[0]: 'city' is not a type of state_schema"
    )


def test_period_without_state_is_a_one_line_error(tmp_path):
    record = user()
    del record["periods"][1]["state"]
    assert _error(tmp_path, record) == "data.json: record 0 (u-1) periods[1]: missing field 'state'"
    record = user()
    del record["periods"][2]["state"]["city"]
    assert _error(tmp_path, record) == (
        "data.json: record 0 (u-1) periods[2].state: missing 'city', required by qas[1]"
    )


def test_choice_state_length_must_match_required_info(tmp_path):
    record = user()
    record["qas"][1]["answer_choices"][0]["state"] = ["Lisbon"]
    assert _error(tmp_path, record) == (
        "data.json: record 0 (u-1) qas[1].answer_choices[0]: 'state' has 1 values for "
        "2 required_info"
    )


def test_gold_choice_and_true_state(data_file):
    first = read_environment(data_file)[0]
    gym = first.questions[1]
    assert true_state(gym, first.periods[2]) == ["Osaka", "keto"]
    assert [gold_choice(gym, p) for p in first.periods] == [0, 1, 2]


def test_order_is_reproducible_and_seeded(data_file):
    a = parse(data_file, seed=0).questions["options"].map(list).tolist()
    assert a == parse(data_file, seed=0).questions["options"].map(list).tolist()
    plain = parse(data_file, shuffle=False).questions
    assert list(plain["options"].iloc[0]) == ["Chickpea curry", "Steak with butter", "Grilled fish"]


def test_bad_input(tmp_path):
    record = user()
    record["qas"][0]["answer_choices"][1]["state"] = "keto"
    path = tmp_path / "data.json"
    path.write_text(json.dumps([record]))
    with pytest.raises(DataError) as info:
        parse(path)
    assert str(info.value) == (
        "data.json: record 0 (u-1) qas[0].answer_choices[1]: 'state' must be a list, "
        "got string 'keto'"
    )


def test_sessions_without_released_messages_load_with_no_turns(tmp_path):
    """The public v1.base reportedly ships sessions with empty ``messages`` (made on-policy)."""
    data = user("u-1")
    for period in data["periods"]:
        for s in period["sessions"]:
            s["messages"] = []
    del data["periods"][0]["sessions"][1]["messages"]
    path = tmp_path / "data.json"
    path.write_text(json.dumps([data]))
    p = parse(path)
    assert p.sessions.empty
    to_arrow(p.sessions, SESSIONS)  # an empty table is still a valid one
    # every qa at every period's checkpoint
    assert len(p.questions) == 3 * 2


def test_read_environment_gives_users_periods_sessions_and_questions(data_file):
    from mnemoflow.data.amemgym import option_order

    raw = user("u-1")
    first, second = read_environment(data_file)
    assert (first.id, second.id) == ("u-1", "u-2")
    assert [len(p.sessions) for p in first.periods] == [len(p["sessions"]) for p in raw["periods"]]
    assert first.periods[1].state == {k: str(v) for k, v in raw["periods"][1]["state"].items()}
    assert first.questions[0].required_info == raw["qas"][0]["required_info"]
    assert first.questions[0].choices[1].state == raw["qas"][0]["answer_choices"][1]["state"]
    n = len(first.questions[0].choices)
    order = option_order(0, "u-1", 0, n)
    assert sorted(order) == list(range(n)) and order == option_order(0, "u-1", 0, n)
    assert option_order(0, "u-1", 0, n, shuffle=False) == list(range(n))


def test_repeated_user_id_is_a_one_line_error(tmp_path):
    # Two users with one id would share a snapshot folder (a FileExistsError deep in the loop) and
    # the scorer would silently score both against the second.
    path = tmp_path / "data.json"
    path.write_text(json.dumps([user("u-1"), user("u-2"), user("u-1")]))
    with pytest.raises(DataError) as info:
        read_environment(path)
    assert str(info.value) == "data.json: record 2 (u-1): 'id' repeats record 0's"
