"""``mnemoflow score --benchmark amemgym`` end to end on a generated data.json."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow import cli
from mnemoflow.data.amemgym import gold_choice, option_order, read_environment
from mnemoflow.data.tables import read_table
from mnemoflow.eval.amemgym.amemgym_score import read_reply_file, score_replies
from tests.jsonl import write_jsonl


def _answer(k):
    return f'Here you go:\n```json\n{{"answer": {k}}}\n```'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """2 users x 3 periods x 3 questions; question 0 always answered wrong, the rest right; the
    upper-bound model always right; recall right only at period 0."""
    tmp = tmp_path_factory.mktemp("amemgym")
    data = tmp / "env" / "data.json"
    argv = ["generate", "amemgym", "--users", "2", "--periods", "2", "--questions", "3"]
    assert cli.main([*argv, "--seed", "3", "--out", str(data.parent)]) == 0
    users = read_environment(data)
    replies, upper, recall = [], [], []
    for user in users:
        for q in user.questions:
            n = len(q.choices)
            order = option_order(9, user.id, q.index, n)
            for k in range(n):
                upper.append(
                    {
                        "user_id": user.id,
                        "question_index": q.index,
                        "option_index": k,
                        "option_order": order,
                        "reply": _answer(order.index(k) + 1),
                    }
                )
            for period in user.periods:
                gold = gold_choice(q, period)
                pick = gold if q.index else (gold + 1) % n
                key = {"user_id": user.id, "period": period.index, "question_index": q.index}
                replies.append(
                    {**key, "option_order": order, "reply": _answer(order.index(pick) + 1)}
                )
                told = {t: (period.state[t] if period.index == 0 else "?") for t in q.required_info}
                recall.append({**key, "reply": json.dumps(told)})
    paths = {
        "replies": write_jsonl(tmp / "replies.jsonl", replies),
        "upper": write_jsonl(tmp / "upper.jsonl", upper),
        "recall": write_jsonl(tmp / "recall.jsonl", recall),
    }
    return tmp, data, users, paths


def _score(data, paths, out, *extra):
    return cli.main(
        [
            "score",
            "--benchmark",
            "amemgym",
            "--data",
            str(data),
            "--replies",
            str(paths["replies"]),
            "--upper-bound",
            str(paths["upper"]),
            "--recall",
            str(paths["recall"]),
            "--out",
            str(out),
            *extra,
        ]
    )


def test_cli_writes_and_prints_the_scores(run, capsys):
    tmp, data, users, paths = run
    out = tmp / "out"
    assert _score(data, paths, out) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"amemgym: scored 18 replies of 2 users -> {out}"
    assert "memory_score" in printed and printed.splitlines()[-1].startswith("mean ")
    qs = read_table(out / "question_scores.parquet", "amemgym_question_scores")
    scores = read_table(out / "scores.parquet", "amemgym_scores")
    assert len(qs) == 18 and qs["correct"].sum() == 12  # question 0 wrong: 2 x 3 of 18
    mean = scores[scores["period"].isna()].set_index("metric")["value"]
    assert mean["accuracy"] == pytest.approx(2 / 3)
    assert mean["upper_bound"] == 1.0
    # per user, o = 2/3 at every period, b = 1, r = the user's mean of 1 / #options:
    # memory = mean over users of (2/3 - r_u) / (1 - r_u)
    r = [sum(1 / len(q.choices) for q in u.questions) / 3 for u in users]
    assert mean["memory_score"] == pytest.approx(sum((2 / 3 - x) / (1 - x) for x in r) / 2)
    assert mean["random"] == pytest.approx(sum(r) / 2)
    # recall right only at period 0: period 0's wrong answers are utilization failures; later
    # a type wrong now was right where it was written (period 0) -> read, or written since -> write
    by_period = scores[scores["period"].notna()]
    w, rd, u = (
        by_period[by_period["metric"] == m].set_index("period")["value"]
        for m in ("write_failure_rate", "read_failure_rate", "utilization_failure_rate")
    )
    assert u[0] == pytest.approx(1 / 3) and w[0] == 0 and rd[0] == 0
    for p in (1, 2):
        assert u[p] == 0 and w[p] + rd[p] == pytest.approx(1 / 3)
    # the same numbers as the library call (the workflow's score job)
    lib_qs, lib_scores = score_replies(
        users,
        read_reply_file(paths["replies"], "replies"),
        read_reply_file(paths["upper"], "upper"),
        read_reply_file(paths["recall"], "recall"),
    )
    pd.testing.assert_series_equal(
        lib_scores["value"], scores["value"], check_names=False, check_dtype=False
    )


def test_reference_upper_bound_flag(run, capsys):
    tmp, data, _, paths = run
    assert _score(data, paths, tmp / "ref", "--reference-upper-bound") == 0
    scores = read_table(tmp / "ref" / "scores.parquet", "amemgym_scores")
    mean = scores[scores["period"].isna()].set_index("metric")["value"]
    assert mean["upper_bound"] == 1.0  # a model that is always right collides harmlessly


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"user_id": "u", "period": 0, "reply": "x"}', "line 2: missing field 'question_index'"),
        (
            '{"user_id": "u", "period": "0", "question_index": 0, "reply": "x"}',
            "line 2: 'period' must be an integer >= 0, got '0'",
        ),
        (
            '{"user_id": "u", "period": 0, "question_index": 0, "reply": 3}',
            "line 2: 'reply' must be a string, got 3",
        ),
        (
            '{"user_id": "u", "period": 0, "question_index": 0, "reply": "x", "option_order": "1"}',
            "line 2: 'option_order' must be a list of integers, got '1'",
        ),
        (
            '{"user_id": "nobody", "period": 0, "question_index": 0, "reply": "x"}',
            "line 2: user_id 'nobody' is not in the data",
        ),
        (
            '{"user_id": "USER", "period": 7, "question_index": 0, "reply": "x"}',
            "line 2: 'period' must be 0..2, got 7",
        ),
    ],
)
def test_bad_reply_lines_name_file_line_and_field(run, tmp_path, capsys, line, message):
    _, data, users, paths = run
    good = paths["replies"].read_text().splitlines()[0]
    bad = tmp_path / "replies.jsonl"
    bad.write_text(good + "\n" + line.replace("USER", users[0].id) + "\n")
    code = cli.main(
        ["score", "--benchmark", "amemgym", "--data", str(data), "--replies", str(bad)]
        + ["--out", str(tmp_path / "out")]
    )
    assert code == 2
    assert capsys.readouterr().err == f"mnemoflow score: error: {bad}: {message}\n"


def test_missing_replies_and_predictions_are_named(run, tmp_path, capsys):
    _, data, _, _ = run
    base = ["score", "--data", str(data), "--out", str(tmp_path)]
    assert cli.main([*base, "--benchmark", "amemgym"]) == 2
    assert capsys.readouterr().err.endswith(
        "--benchmark amemgym needs --replies (or --eval-output)\n"
    )
    assert cli.main([*base, "--benchmark", "locomo"]) == 2
    assert capsys.readouterr().err.endswith("--benchmark locomo needs --predictions\n")
