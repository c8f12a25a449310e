"""Offline defaults that measure memory, not template fit: a generic fact writer, facts about
other people kept as theirs, and a long-context reader that reads exactly what its prompt holds.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.agents import locomo_reader
from mnemoflow.llm.offline.reader import answer as offline_answer
from mnemoflow.llm.offline.writer import extract, kv_update, split_fact, update_facts


def facts(text: str, speaker: str = "user") -> list[str]:
    return [f["text"] for f in extract([{"n": 1, "speaker": speaker, "content": text}])]


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        # phrasings no generator of this repository uses
        ("To be honest - my car is a Civic.", "User's car is a Civic."),
        ("Honestly my favourite food has been ramen for years.", None),
        ("I reckon that my commute is forty minutes.", "User's commute is forty minutes."),
        ("Oh, I'm a night owl.", "User is a night owl."),
        ("FYI: my landlord is Mr. Park.", None),
    ],
)
def test_first_person_statements_are_facts_however_they_open(said, fact):
    got = facts(said)
    assert len(got) == 1, got
    if fact is not None:
        assert got[0] == fact


@pytest.mark.parametrize(
    "said",
    [
        "Can you give me a few tips about baking?",  # a question
        "Help me make a short list for the trip.",  # a request
        "Got it, I will keep that in mind.",  # an intention
        "I'd like a shorter answer.",  # a wish
        "Our neighbour is a pilot.",  # about someone else
        "Thanks for letting me know!",
    ],
)
def test_questions_requests_intentions_and_other_subjects_are_not_facts(said):
    assert facts(said) == []


def test_a_value_ends_before_an_afterthought_or_a_time_adverbial():
    assert split_fact("User's diet is vegan, I guess.") == (frozenset({"user's", "diet"}), "vegan")
    assert split_fact("User's diet is vegan at the moment.")[1] == "vegan"
    assert split_fact("User's diet has been vegan.")[1] == "vegan"


def test_a_fact_about_the_roommate_is_not_the_users_attribute():
    roommate = facts("My roommate's job is nurse.")[0]
    assert roommate == "User's roommate's job is nurse."
    assert split_fact(roommate)[0] == frozenset({"user's", "roommate's", "job"})
    stored = [{"id": "0", "text": "User's job is teacher."}]
    # mem0-style update: the user's job stays; the roommate's is a memory of its own.
    for said in ("My roommate's job is nurse.", "My roommate told me their job is nurse."):
        reply = json.loads(update_facts({"facts": [{"text": facts(said)[0]}], "memories": stored}))
        assert [e["event"] for e in reply["memory"]] == ["ADD"], (said, reply)
    # key -> value memory: the roommate's job gets its own key.
    reply = json.loads(
        kv_update(
            {
                "memory": [{"key": "user's job", "value": "teacher", "time": "t0"}],
                "messages": [
                    {
                        "n": 1,
                        "speaker": "user",
                        "role": "user",
                        "time": "t1",
                        "content": "I think my roommate's job is nurse.",
                    },
                ],  # fmt: skip
            }
        )
    )
    assert reply == {
        "set": [{"key": "user's roommate's job", "value": "nurse", "from": [1]}],
        "delete": [],
    }


def test_the_users_own_update_still_replaces_the_old_value():
    stored = [{"id": "0", "text": "User's job is teacher."}]
    new = facts("Anyway, my job is pilot these days.")
    assert new == ["User's job is pilot these days."]
    reply = json.loads(update_facts({"facts": [{"text": new[0]}], "memories": stored}))
    assert reply["memory"] == [
        {"event": "UPDATE", "id": "0", "text": "User's job is pilot these days.", "fact": 0}
    ]


def _conversation() -> pd.DataFrame:
    """Two sessions of a LoCoMo-style conversation; the early one holds the only evidence."""
    rows = [
        ("s1", 0, "2023-05-01", "Caroline", "I adopted a greyhound called Biscuit."),
        ("s1", 1, "2023-05-01", "Melanie", "That is lovely news."),
        ("s2", 0, "2023-06-01", "Caroline", "Work was busy this week."),
        ("s2", 1, "2023-06-01", "Melanie", "Mine too, lots of meetings."),
    ]
    return pd.DataFrame(
        [
            {
                "session_id": sid,
                "session_index": int(sid[1]),
                "turn_index": t,
                "turn_id": f"{sid}_t{t}",
                "session_time": time,
                "speaker": speaker,
                "content": text,
            }
            for sid, t, time, speaker, text in rows
        ]
    )


def test_long_context_reader_reads_only_the_turns_the_prompt_holds():
    turns = _conversation()
    question = {
        "question_id": "q1",
        "question": "What is Caroline's dog called?",
        "question_type": "single-hop",
        "answer": "Biscuit",
        "meta": json.dumps({"category": 4}),
    }
    _, all_ids = locomo_reader.conversation_context(turns, 10_000)
    assert all_ids == ["s1_t0", "s1_t1", "s2_t0", "s2_t1"]
    # A budget that holds the newest session only: the prompt drops the adoption turn ...
    start = locomo_reader._START.format(a="Caroline", b="Melanie")
    budget = locomo_reader.count_tokens(start) + sum(
        locomo_reader.count_tokens(locomo_reader._line(r)) + 1
        for r in turns[turns.session_id == "s2"].to_dict("records")
    )
    options = locomo_reader.LocomoReadingOptions(mode="long_context", budget_tokens=budget)
    request = locomo_reader.build_request(question, [], options, turns)
    prompt = request.messages[0]["content"]
    assert "Biscuit" not in prompt
    _, kept = locomo_reader.conversation_context(turns, budget)
    assert kept == ["s2_t0", "s2_t1"]
    # ... and so does what the offline reader receives: it cannot answer from the cut turn.
    shown = [p["text"] for p in request.fields["context"]]
    assert shown == [locomo_reader._line(r) for r in turns.iloc[2:].to_dict("records")]
    assert all(line in prompt for line in shown)
    assert "Biscuit" not in offline_answer(request.fields)
    # With the whole conversation in budget the reader finds it.
    full = locomo_reader.build_request(
        question, [], locomo_reader.LocomoReadingOptions(mode="long_context"), turns
    )
    assert "Biscuit" in offline_answer(full.fields)
