"""AMemGym scores on hand-built environments, every expected number worked out in the comments."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from mnemoflow.data.amemgym import AmemChoice, AmemPeriod, AmemQuestion, AmemUser
from mnemoflow.data.tables import AMEMGYM_QUESTION_SCORES, AMEMGYM_SCORES, to_arrow
from mnemoflow.eval.amemgym.amemgym_score import (
    is_option_order,
    memory_scores,
    score_replies,
    write_position,
)


def make_user(uid, states, questions):
    """A user with one period per state and questions ``(required_info, [choice states])``."""
    schema: dict[str, list[str]] = {}
    for state in states:
        for key, value in state.items():
            schema.setdefault(key, [])
            if value not in schema[key]:
                schema[key].append(value)
    periods = [AmemPeriod(p, None, None, dict(s), {}, []) for p, s in enumerate(states)]
    qs = [
        AmemQuestion(
            j,
            f"question {j}?",
            list(required),
            [AmemChoice(list(c), f"advice {j}.{k}", "experience") for k, c in enumerate(choices)],
        )
        for j, (required, choices) in enumerate(questions)
    ]
    return AmemUser(uid, "2024-01-01", {}, "", schema, periods, qs)


def answer(k):
    return f'```json\n{{"answer": {k}}}\n```'


def replies(rows):
    return pd.DataFrame(rows, columns=["user_id", "period", "question_index", "reply"])


def upper_rows(rows):
    return pd.DataFrame(rows, columns=["user_id", "question_index", "option_index", "reply"])


def metric(scores, name, period=None):
    if period is None:
        row = scores[scores["period"].isna() & (scores["metric"] == name)]
    else:
        row = scores[(scores["period"] == period) & (scores["metric"] == name)]
    assert len(row) == 1, (name, period)
    return float(row["value"].iloc[0])


def test_memory_score_is_averaged_per_user_period_not_a_ratio_of_global_means():
    # A: 2 options (r = 1/2), answered right, upper bound 1 -> (1 - 1/2) / (1 - 1/2) = 1
    # B: 4 options (r = 1/4), answered wrong, upper bound 1 -> (0 - 1/4) / (1 - 1/4) = -1/3
    # reported: mean(1, -1/3) = 1/3. Ratio of global means: o = 1/2, r = 3/8, b = 1
    # -> (1/2 - 3/8) / (1 - 3/8) = (1/8) / (5/8) = 1/5 -- a different number.
    a = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])])
    b = make_user("B", [{"x": "x1"}], [(["x"], [["x1"], ["x2"], ["x3"], ["x4"]])])
    got, scores = score_replies(
        [a, b],
        replies([("A", 0, 0, answer(1)), ("B", 0, 0, answer(2))]),
        upper_rows([("A", 0, 0, answer(1)), ("B", 0, 0, answer(1))]),
    )
    assert got["correct"].tolist() == [1.0, 0.0]
    assert got["random"].tolist() == [0.5, 0.25]
    assert metric(scores, "memory_score") == pytest.approx(1 / 3)
    assert metric(scores, "memory_score", 0) == pytest.approx(1 / 3)
    o, r, b_ = 0.5, 0.375, 1.0
    assert (o - r) / (b_ - r) == pytest.approx(0.2)  # the wrong order, for the record
    assert metric(scores, "accuracy") == 0.5 and metric(scores, "upper_bound") == 1.0


def test_memory_score_undefined_where_upper_bound_equals_random():
    # A: upper bound 1/2 with 2 options = random -> no ratio (NaN, counted, left out of the mean)
    # B: 2 options, right, upper bound 1 -> 1
    a = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])] * 2)
    b = make_user("B", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])])
    got, scores = score_replies(
        [a, b],
        replies([("A", 0, 0, answer(1)), ("A", 0, 1, answer(2)), ("B", 0, 0, answer(1))]),
        upper_rows([("A", 0, 0, answer(1)), ("A", 1, 0, answer(2)), ("B", 0, 0, answer(1))]),
    )
    # A: o = 1/2, r = 1/2, b = (1 + 0) / 2 = 1/2 -> b == r
    per = memory_scores(got)
    assert math.isnan(per.loc[per["user_id"] == "A", "memory_score"].iloc[0])
    assert metric(scores, "memory_score") == 1.0
    assert metric(scores, "memory_score_undefined") == 1.0
    n = scores[scores["period"].isna() & (scores["metric"] == "memory_score")]["n"].iloc[0]
    assert n == 1
    assert metric(scores, "upper_below_random") == 0.0


def test_upper_below_random_counts_pairs_whose_bound_is_under_random():
    # A: 2 options, the upper-bound reply picks the wrong state -> b = 0 < r = 1/2 (counted);
    # B: upper bound 1 > 1/2 (not counted)
    a = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])])
    b = make_user("B", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])])
    _, scores = score_replies(
        [a, b],
        replies([("A", 0, 0, answer(1)), ("B", 0, 0, answer(1))]),
        upper_rows([("A", 0, 0, answer(2)), ("B", 0, 0, answer(1))]),
    )
    assert metric(scores, "upper_below_random") == 1.0
    assert metric(scores, "upper_below_random", 0) == 1.0
    assert metric(scores, "memory_score") == pytest.approx((-1.0 + 1.0) / 2)


def test_random_baseline_with_varying_option_counts():
    # 2, 3, 4 and 5 options: (1/2 + 1/3 + 1/4 + 1/5) / 4 = (30 + 20 + 15 + 12) / 240 = 77/240
    questions = [(["x"], [[f"x{k}"] for k in range(1, n + 1)]) for n in (2, 3, 4, 5)]
    user = make_user("A", [{"x": "x1"}], questions)
    _, scores = score_replies([user], replies([("A", 0, j, answer(1)) for j in range(4)]))
    assert metric(scores, "random") == pytest.approx(77 / 240)
    assert metric(scores, "random", 0) == pytest.approx(0.3208333333)
    assert metric(scores, "accuracy") == 1.0
    assert "upper_bound" not in set(scores["metric"])  # no upper replies, no upper bound


def test_strict_parsing_and_shown_option_order():
    user = make_user("A", [{"x": "x2"}], [(["x"], [["x1"], ["x2"], ["x3"]])] * 4)
    frame = replies(
        [
            ("A", 0, 0, answer(1)),  # shown order [1, 0, 2]: option 1 is choice 1 = x2, right
            ("A", 0, 1, answer(0)),  # 0 is no option (the reference reads it as the last one)
            ("A", 0, 2, "I would pick 2"),  # no JSON: a parse failure, never a random option
            ("A", 0, 3, answer(2)),  # parses, but the gateway had given up on it
        ]
    )
    frame["option_order"] = [[1, 0, 2], None, None, None]
    frame["parse_ok"] = [True, True, True, False]
    got, scores = score_replies([user], frame)
    assert got["chosen_option"].tolist() == [1, None, None, None]
    assert got["correct"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert metric(scores, "parse_failures") == 3.0
    to_arrow(got, AMEMGYM_QUESTION_SCORES)
    to_arrow(scores, AMEMGYM_SCORES)


def test_upper_bound_per_question_and_the_reference_state_tuple_collision():
    # q0 and q1 both depend on x alone; at x = x1 the model, told the state, gets q0 right and q1
    # wrong. Per question: UB(q0) = 1, UB(q1) = 0. The reference keys its dict by the tuple
    # ("x1",) over all questions, q1 written last, so both questions get q1's 0.
    user = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]]), (["x"], [["x2"], ["x1"]])])
    up = upper_rows(
        [
            ("A", 0, 0, answer(1)),  # told x1 (option 0), picks option 1 = x1: right
            ("A", 1, 1, answer(1)),  # told x1 (option 1), picks option 1 = x2: wrong
            ("A", 1, 0, answer(1)),  # told x2 (option 0), picks x2: right
        ]
    )
    frame = replies([("A", 0, 0, answer(1)), ("A", 0, 1, answer(2))])
    per_question, scores = score_replies([user], frame, up)
    assert per_question["upper_bound"].tolist() == [1.0, 0.0]
    assert metric(scores, "upper_parse_failures") == 0.0
    assert metric(scores, "upper_bound") == 0.5
    reference, ref_scores = score_replies([user], frame, up, reference_upper_bound=True)
    assert reference["upper_bound"].tolist() == [0.0, 0.0]
    assert metric(ref_scores, "upper_bound") == 0.0


def test_upper_bound_missing_for_the_true_option_is_an_error():
    user = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x2"]])])
    with pytest.raises(ValueError) as info:
        score_replies(
            [user], replies([("A", 0, 0, answer(1))]), upper_rows([("A", 0, 1, answer(2))])
        )
    assert str(info.value) == (
        "upper: no reply for user A question 0 option 0 (the true state at period 0)"
    )


STATES = [{"x": "x1", "y": "y1"}, {"x": "x2", "y": "y1"}, {"x": "x2", "y": "y1"}]
QUESTIONS = [
    (["x", "y"], [["x1", "y1"], ["x2", "y1"], ["x3", "y1"], ["x1", "y2"]]),
    (["y"], [["y1"], ["y2"], ["y3"]]),
]


def recall(x=None, y=None):
    return "```json\n" + json.dumps({k: v for k, v in (("x", x), ("y", y)) if v}) + "\n```"


def test_diagnosis_split_adds_up_to_one_minus_accuracy():
    user = make_user("A", STATES, QUESTIONS)
    assert [write_position(user, "x", p) for p in range(3)] == [0, 1, 1]
    assert [write_position(user, "y", p) for p in range(3)] == [0, 0, 0]
    frame = replies(
        [
            ("A", 0, 0, answer(1)),  # right
            ("A", 0, 1, answer(1)),  # right
            ("A", 1, 0, answer(1)),  # wrong: x recalled x1 at p1, where x was written -> write
            ("A", 1, 1, "y1 I guess"),  # parse failure, wrong; y recalled right -> utilization
            ("A", 2, 0, answer(3)),  # wrong: x wrong now and at p1 (write), y wrong now only
            ("A", 2, 1, answer(1)),  # right
        ]
    )
    rec = replies(
        [
            ("A", 0, 0, recall("x1", "y1")),
            ("A", 0, 1, recall(y="y1")),
            ("A", 1, 0, recall("x1", "y1")),
            ("A", 1, 1, recall(y="y1")),
            ("A", 2, 0, recall("x1", "y3")),  # x wrong (write at p1 wrong), y wrong (right at p0)
            ("A", 2, 1, "not json"),
        ]
    )
    got, scores = score_replies([user], frame, recall=rec)
    assert got["failure"].tolist() == ["none", "none", "write", "utilization", "write+read", "none"]
    assert got["write_failure"].tolist() == [0, 0, 1, 0, 0.5, 0]
    assert got["read_failure"].tolist() == [0, 0, 0, 0, 0.5, 0]
    assert got["recall_parse_ok"].tolist() == [True, True, True, True, True, False]
    assert got["recall_correct"].tolist() == [1, 1, 0.5, 1, 0, 0]
    # p0: acc 1, W = R = U = 0; p1: acc 0, W = 1/2, U = 1/2; p2: acc 1/2, W = R = 1/4
    expected = {0: (1, 0, 0, 0), 1: (0, 0.5, 0, 0.5), 2: (0.5, 0.25, 0.25, 0)}
    for p, (acc, w, r, u) in expected.items():
        assert metric(scores, "accuracy", p) == acc
        assert metric(scores, "write_failure_rate", p) == w
        assert metric(scores, "read_failure_rate", p) == r
        assert metric(scores, "utilization_failure_rate", p) == u
        assert w + r + u == 1 - acc
    # reported: mean over periods W = 0.75 / 3, R = 0.25 / 3, U = 0.5 / 3; sum = 1 - 0.5
    assert metric(scores, "write_failure_rate") == pytest.approx(0.25)
    assert metric(scores, "read_failure_rate") == pytest.approx(1 / 12)
    assert metric(scores, "utilization_failure_rate") == pytest.approx(1 / 6)
    assert metric(scores, "parse_failures") == 1.0 and metric(scores, "parse_failures", 1) == 1.0
    assert metric(scores, "recall_parse_failures") == 1.0  # p2 q1's "not json"
    assert metric(scores, "recall_parse_failures", 0) == 0.0


def test_a_type_wrong_at_its_write_checkpoint_stays_a_write_failure():
    # x changes at p1; recalled wrong at p1, right at p2, wrong again at p3 -> write at p3 (the
    # reference compares with the write checkpoint only, not with the last right recall)
    states = [{"x": "x1"}, {"x": "x2"}, {"x": "x2"}, {"x": "x2"}]
    user = make_user("A", states, [(["x"], [["x1"], ["x2"], ["x3"]])])
    frame = replies([("A", p, 0, answer(3)) for p in range(4)])
    rec = replies([("A", p, 0, recall(x=x)) for p, x in enumerate(["x1", "x1", "x2", "x3"])])
    got, _ = score_replies([user], frame, recall=rec)
    assert got["failure"].tolist() == ["utilization", "write", "utilization", "write"]


def test_recall_missing_at_the_write_checkpoint_is_an_error():
    user = make_user("A", STATES, QUESTIONS)
    with pytest.raises(ValueError) as info:
        score_replies(
            [user],
            replies([("A", 2, 0, answer(3))]),
            recall=replies([("A", 2, 0, recall("x1", "y1"))]),
        )
    assert str(info.value) == (
        "recall: no reply for user A period 1 question 0 (where 'x' was last written, needed at "
        "period 2)"
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (("B", 0, 0, "x"), "replies row 0: user_id 'B' is not in the data"),
        (("A", 3, 0, "x"), "replies row 0: 'period' must be 0..2, got 3"),
        (("A", 0, 2, "x"), "replies row 0: 'question_index' must be 0..1, got 2"),
    ],
)
def test_reply_rows_naming_nothing_in_the_data_are_errors(row, message):
    user = make_user("A", STATES, QUESTIONS)
    with pytest.raises(ValueError) as info:
        score_replies([user], replies([row]))
    assert str(info.value) == message


def test_repeated_reply_and_bad_option_order_are_errors():
    user = make_user("A", STATES, QUESTIONS)
    with pytest.raises(ValueError, match=r"^replies row 1: user A period 0 question 0 repeats$"):
        score_replies([user], replies([("A", 0, 0, "x"), ("A", 0, 0, "y")]))
    frame = replies([("A", 0, 1, answer(1))])
    frame["option_order"] = [[0, 0, 1]]
    with pytest.raises(ValueError) as info:
        score_replies([user], frame)
    assert str(info.value) == (
        "replies row 0: 'option_order' must be a permutation of 0..2, got [0, 0, 1]"
    )


def test_random_baseline_counts_every_option_holding_the_true_state():
    # The reference's random = mean over options of [option state == true state]. Two of the
    # three options hold x1 (a hand-made file may repeat a state): random = 2/3, not 1/3; the
    # second x1 option is as right as the first (accuracy compares states).
    user = make_user("A", [{"x": "x1"}], [(["x"], [["x1"], ["x1"], ["x2"]])])
    got, scores = score_replies([user], replies([("A", 0, 0, answer(2))]))
    assert got["random"].tolist() == [pytest.approx(2 / 3)]
    assert got["correct"].tolist() == [1.0] and got["gold_option"].tolist() == [0]
    assert metric(scores, "random") == pytest.approx(2 / 3)


def test_repeated_upper_and_recall_rows_are_errors():
    user = make_user("A", STATES, QUESTIONS)
    frame = replies([("A", 0, 1, answer(1))])
    up = upper_rows([("A", 1, 0, answer(1)), ("A", 1, 0, answer(2))])
    with pytest.raises(ValueError, match=r"^upper row 1: user A question 1 option 0 repeats$"):
        score_replies([user], frame, up)
    rec = replies([("A", 0, 1, recall(y="y1")), ("A", 0, 1, recall(y="y2"))])
    with pytest.raises(ValueError, match=r"^recall row 1: user A period 0 question 1 repeats$"):
        score_replies([user], frame, recall=rec)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (None, True),
        ([], True),
        ([2, 0, 1], True),
        ([0, True], False),
        ((0, 1), False),
        ("0", False),
    ],
)
def test_is_option_order_accepts_none_or_a_list_of_integers(value, ok):
    assert is_option_order(value) is ok
