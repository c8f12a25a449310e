"""AMemGym reply parsing: strict where the reference guesses (random option, index from the end)."""

from __future__ import annotations

import pytest

from mnemoflow.eval.amemgym.amemgym_replies import parse_answer, parse_recall
from mnemoflow.llm.types import UnparseableReply


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{\n    "answer": 3\n}\n```', 3),
        ('{"answer": 1}', 1),
        ('Sure.\n```json\n{"answer": 4}\n```\nHope that helps.', 4),
        ('```JSON\n{"answer": 2}```', 2),
    ],
)
def test_fenced_and_bare_replies_give_the_1_based_option(text, expected):
    assert parse_answer(text, n_options=4) == expected


@pytest.mark.parametrize(
    "text",
    [
        'I pick {"answer": 2} because of my diet.',  # prose around bare JSON: not JSON
        '{"answer": 0}',  # the reference reads 0 as the last option
        '{"answer": -1}',
        '{"answer": 5}',  # only 4 options
        '{"answer": "2"}',  # a string number
        '{"answer": 2.0}',
        '{"answer": true}',
        '{"choice": 2}',
        "[2]",
        "",
    ],
)
def test_anything_else_is_unparseable_never_a_guess(text):
    with pytest.raises(UnparseableReply):
        parse_answer(text, n_options=4)


def test_recall_reads_an_object_and_rejects_anything_else():
    reply = '```json\n{"diet": "vegan", "pets": 2}\n```'
    assert parse_recall(reply) == {"diet": "vegan", "pets": "2"}
    with pytest.raises(UnparseableReply):
        parse_recall('["vegan"]')
    with pytest.raises(UnparseableReply):
        parse_recall("I believe you are vegan.")
