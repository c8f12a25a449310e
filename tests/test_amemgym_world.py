"""The topic world the offline AMemGym writer and assistant share (mnemoflow/amemgym_world.py):
what is written can be read back, values are whole phrases, and only the user's statements count."""

from __future__ import annotations

import pytest

from mnemoflow import amemgym_world as world

TYPES = world.types()


@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_written_sentence_and_advice_reads_back_as_its_value(name):
    template = TYPES[name]
    choices = template["choices"]
    for value in choices:
        assert world.statements(world.sentence(name, value)) == {name: value}
        assert world.implied_values(world.fragment(name, choices, value)) == {name: value}


def test_choices_are_distinct_phrases_none_inside_another_types():
    phrases = [(name, world.phrase(v)) for name, t in TYPES.items() for v in t["choices"]]
    for name, needle in phrases:
        for other, hay in phrases:
            if (name, needle) != (other, hay):
                assert not world._find(needle, hay), (name, needle, other, hay)


def test_values_are_whole_phrases_not_stem_sets():
    # the old reader compared stem sets: "up and down" stemmed to nothing, and "over an hour"
    # collided with "about an hour"
    assert world.statements("My stress level has been up and down lately.") == {
        "stress_level": "up and down"
    }
    assert world.statements("My screen time outside work is about an hour each day.") == {
        "screen_time": "about an hour"
    }
    said = "My weeknight cooking time is over an hour on most days."
    assert world.statements(said) == {"weeknight_cooking_time": "over an hour"}


def test_a_statement_needs_its_types_cue_and_is_no_question():
    assert world.statements("Good to know.") == {}  # "good" is a sleep quality, but no "sleep"
    assert world.statements("Is my sleep good enough?") == {}
    assert world.statements("My sleep has been good recently.") == {"sleep_quality": "good"}


def test_a_retold_value_keeps_its_possessive():
    told = "User's living situation is living with user's partner these days."
    assert world.statements(told) == {"living_situation": "living with my partner"}
    recalled = "From what I remember, your living situation is living with your partner."
    assert world.statements(recalled) == {"living_situation": "living with my partner"}


def test_belief_is_the_latest_statement_that_is_not_the_assistants():
    context = [
        {"role": "user", "text": "My diet is vegetarian these days."},
        {"role": "user", "text": "Quick update on my side. My diet is fully plant-based now."},
        {"role": "assistant", "text": "From what I remember, your diet is vegetarian."},
        "assistant: Noted: your sleep quality is good now.",  # a speaker label names the role
    ]
    read = world.belief(context)
    assert read.current == {"diet": "fully plant-based"}
    assert read.seen == {"diet": ["vegetarian", "fully plant-based"]}


def test_a_given_state_object_is_believed_as_given():
    assert world.belief(['{\n  "diet": "vegetarian"\n}']).current == {"diet": "vegetarian"}


def test_an_option_is_scored_by_the_values_its_advice_implies():
    required, choices = ["diet", "monthly_budget"], {n: TYPES[n]["choices"] for n in TYPES}
    believed = world.belief(["My diet is vegetarian these days.", "My monthly budget is tight."])
    right = world.advice(required, choices, ["vegetarian", "tight"])
    half = world.advice(required, choices, ["vegetarian", "comfortable"])
    wrong = world.advice(required, choices, ["eating everything", "comfortable"])
    assert [world.consistency(o, believed) for o in (right, half, wrong)] == [2, 0, -2]
    assert world.consistency(right, world.Belief()) == 0  # nothing known: every option ties


def test_an_open_type_is_read_from_my_x_is_y_and_from_a_note():
    read = world.belief(["My city is Osaka these days.", "user's pet name: Otis"])
    assert read.current == {"city": "Osaka", "pet name": "Otis"}
    assert world.consistency("A run along the river in Osaka", read) == 1
