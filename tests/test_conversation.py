"""The live conversation loop shared by MemoryBench dialogue generation and AMemGym sessions."""

from __future__ import annotations

import asyncio

import pytest

from mnemoflow.protocols.conversation import Turn, converse, dialogue_rows, turns_of


class Counter:
    """An assistant that numbers its answers and remembers what it was shown."""

    def __init__(self):
        self.seen: list[int] = []

    async def act(self, history):
        self.seen.append(len(history))
        return f"answer {len([t for t in history if t.role == 'assistant'])}"


class User:
    def __init__(self, end_after: int | None = None):
        self.end_after = end_after
        self.calls = 0

    async def reply(self, history):
        self.calls += 1
        assert history[-1].role == "assistant"
        end = self.end_after is not None and self.calls >= self.end_after
        return Turn("user", f"feedback {self.calls}", implicit_action="dislike", terminated=end)


def test_max_rounds_answers_with_the_simulator_between_them_and_none_after_the_last():
    assistant, user = Counter(), User()
    turns = asyncio.run(converse(assistant, user, "question", max_rounds=3))
    assert [(t.role, t.round) for t in turns] == [
        ("user", 0),
        ("assistant", 0),
        ("user", 1),
        ("assistant", 1),
        ("user", 2),
        ("assistant", 2),
    ]
    assert user.calls == 2 and assistant.seen == [1, 3, 5]


def test_a_terminating_user_turn_is_recorded_and_not_answered():
    turns = asyncio.run(converse(Counter(), User(end_after=1), "question", max_rounds=3))
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert turns[-1].terminated and turns[-1].implicit_action == "dislike"


def test_one_round_is_one_answer_and_no_simulator_call():
    user = User()
    turns = asyncio.run(converse(Counter(), user, "q", max_rounds=1))
    assert [t.content for t in turns] == ["q", "answer 0"] and user.calls == 0
    with pytest.raises(ValueError, match="max_rounds"):
        asyncio.run(converse(Counter(), user, "q", max_rounds=0))


def test_rows_round_trip():
    turns = asyncio.run(converse(Counter(), User(end_after=2), "q", max_rounds=3))
    rows = dialogue_rows(turns, episode_id="u1", dialogue_id="d1", source="generated")
    assert rows[2] == {
        "episode_id": "u1",
        "dialogue_id": "d1",
        "source": "generated",
        "round": 1,
        "role": "user",
        "content": "feedback 1",
        "implicit_action": "dislike",
        "terminated": False,
    }
    assert turns_of(rows) == turns
