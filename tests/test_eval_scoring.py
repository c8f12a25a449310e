"""Aggregates (micro, task-averaged macro, abstention, per type, CIs) and the failure diagnosis."""

from __future__ import annotations

import pandas as pd
import pytest

from mnemoflow.data.tables import JUDGEMENTS, SCORES
from mnemoflow.eval.static_qa.diagnosis import (
    classify,
    diagnose,
    diagnosis_rates,
    diagnosis_scores,
    report_rows,
)
from mnemoflow.eval.static_qa.scoring import aggregate, question_scores
from mnemoflow.intervals import wilson_interval

RUN = {"benchmark": "longmemeval", "system": "bm25", "protocol": "static_qa", "step": 0}


def _judgements(rows, metric="accuracy"):
    return pd.DataFrame(
        [
            {
                **RUN,
                "question_id": qid,
                "question_type": qtype,
                "judge": "j/v1",
                "metric": metric,
                "value": value,
                "raw_reply": "",
                "parse_ok": value == value,
            }
            for qid, qtype, value in rows
        ],
        columns=JUDGEMENTS.names,
    )


def _score(scores, metric, aggregate_name):
    row = scores[(scores["metric"] == metric) & (scores["aggregate"] == aggregate_name)]
    assert len(row) == 1, (metric, aggregate_name)
    return row.iloc[0]["value"], row.iloc[0]["n"]


def test_longmemeval_micro_macro_abstention_and_per_type():
    judgements = _judgements(
        [
            ("a1", "single-session-user", 1.0),
            ("a2", "single-session-user", 0.0),
            ("a3", "single-session-user", 0.0),
            ("b1", "multi-session", 1.0),
            ("b2_abs", "multi-session", 1.0),
            ("b3", "multi-session", float("nan")),  # a judge reply that did not parse
        ]
    )
    scores = aggregate(question_scores(judgements), "longmemeval")
    assert list(scores.columns) == SCORES.names
    assert _score(scores, "accuracy", "micro") == (pytest.approx(3 / 5), 5)
    # task-averaged: mean(1/3, 1) = 2/3 (abstention stays inside its type)
    assert _score(scores, "accuracy", "macro")[0] == pytest.approx(2 / 3)
    assert _score(scores, "accuracy", "type:single-session-user") == (pytest.approx(1 / 3), 3)
    assert _score(scores, "accuracy", "abstention") == (1.0, 1)
    assert _score(scores, "judge_parse_failures", "count") == (1.0, 6)
    low, _ = _score(scores, "accuracy", "ci95_low")
    high, _ = _score(scores, "accuracy", "ci95_high")
    assert (low, high) == pytest.approx(wilson_interval(3, 5))


def test_wilson_interval_worked_example():
    # 8 of 10, z^2 = 3.8415: centre (0.8 + 3.8415/20) / 1.38415 = 0.7167,
    # half-width 1.96 * sqrt(0.016 + 3.8415/400) / 1.38415 = 0.2266
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)


def test_locomo_f1_overall_includes_adversarial_and_reports_without_it():
    judgements = _judgements(
        [("q0", "multi-hop", 0.5), ("q1", "single-hop", 1.0), ("q2", "adversarial", 0.0)],
        metric="f1",
    ).assign(benchmark="locomo")
    scores = aggregate(question_scores(judgements), "locomo")
    assert _score(scores, "f1", "micro")[0] == pytest.approx(0.5)
    assert _score(scores, "f1", "micro:no-adversarial")[0] == pytest.approx(0.75)
    assert _score(scores, "f1", "type:adversarial") == (0.0, 1)
    assert not (scores["metric"] == "judge_parse_failures").any()  # F1 is not an LLM judge


def test_locomo_j_gets_the_same_wilson_interval_as_accuracy():
    # 8 of 10 judged CORRECT: Wilson 95 % interval [0.4902, 0.9433]; F1 gets none.
    judgements = pd.concat(
        [
            _judgements([(f"q{i}", "single-hop", float(i < 8)) for i in range(10)], metric="j"),
            _judgements([(f"q{i}", "single-hop", 0.5) for i in range(10)], metric="f1"),
        ]
    ).assign(benchmark="locomo")
    scores = aggregate(question_scores(judgements), "locomo")
    low, n = _score(scores, "j", "ci95_low")
    high, _ = _score(scores, "j", "ci95_high")
    assert n == 10 and (low, high) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert not ((scores["metric"] == "f1") & scores["aggregate"].str.startswith("ci95")).any()


def test_retrieval_rows_are_named_by_level():
    judgements = _judgements([("a1", "single-session-user", 1.0)])
    retrieval = pd.DataFrame(
        [
            {
                **RUN,
                "question_id": "a1",
                "question_type": "single-session-user",
                "metric": "recall_all@5",
                "value": 1.0,
                "level": "session",
            },
            {
                **RUN,
                "question_id": "a1",
                "question_type": "single-session-user",
                "metric": "recall_all@5",
                "value": 0.0,
                "level": "turn",
            },
        ]
    )
    scores = aggregate(question_scores(judgements, retrieval), "longmemeval")
    assert _score(scores, "session_recall_all@5", "micro")[0] == 1.0
    assert _score(scores, "turn_recall_all@5", "micro")[0] == 0.0


def test_classify_order_write_read_utilization():
    assert classify(["t1", "t2"], stored={"t1"}, retrieved={"t1", "t2"}) == "write_failure"
    assert classify(["t1", "t2"], stored={"t1", "t2"}, retrieved={"t1"}) == "read_failure"
    assert classify(["t1"], stored={"t1"}, retrieved={"t1"}) == "utilization_failure"
    assert classify([], stored=set(), retrieved=set()) == "undiagnosable"


def test_diagnosis_from_tables():
    questions = pd.DataFrame(
        {
            "question_id": ["w", "r", "u", "x", "ok"],
            "evidence_ids": [["e1_3"], ["e1_1"], ["e1_1"], [], ["e1_1"]],
        }
    )
    answers = pd.DataFrame(
        [
            {
                **RUN,
                "episode_id": "e1",
                "question_id": qid,
                "question_type": qtype,
                "retrieved_ids": retrieved,
            }
            for qid, qtype, retrieved in [
                ("w", "single-session-user", ["e1_1"]),
                ("r", "single-session-user", ["e1_2"]),
                ("u", "multi-session", ["e1_1"]),
                ("x", "multi-session", []),
                ("ok", "multi-session", ["e1_1"]),
            ]
        ]
    )
    judgements = _judgements(
        [
            ("w", "single-session-user", 0.0),
            ("r", "single-session-user", 0.0),
            ("u", "multi-session", 0.0),
            ("x", "multi-session", 0.0),
            ("ok", "multi-session", 1.0),
        ]
    )
    stored = pd.DataFrame({"episode_id": ["e1", "e1"], "turn_id": ["e1_1", "e1_2"]})
    diagnosis = diagnose(answers, judgements, questions, stored)
    assert dict(zip(diagnosis["question_id"], diagnosis["cause"], strict=True)) == {
        "w": "write_failure",
        "r": "read_failure",
        "u": "utilization_failure",
        "x": "undiagnosable",
    }
    rates = diagnosis_rates(diagnosis, answers, judgements).set_index("question_type")
    assert rates.loc["all", "n_questions"] == 5 and rates.loc["all", "n_wrong"] == 4
    assert rates.loc["all", "n_correct"] == 1
    assert rates.loc["all", "write_failure_rate"] == 0.25
    assert rates.loc["single-session-user", "read_failure_rate"] == 0.5
    assert rates.loc["multi-session", "utilization_failure"] == 1
    scores = diagnosis_scores(diagnosis_rates(diagnosis, answers, judgements))
    assert list(scores.columns) == SCORES.names
    assert _score(scores, "read_failure_rate", "micro") == (0.25, 4)


def test_report_rows_are_shares_of_all_questions_that_add_up_to_one():
    # Run "bm25": 5 questions; "ok" correct, "w" never stored, "r" stored but not retrieved, "x"
    # wrong without evidence ids, "p" unjudged (the judge reply did not parse). Run "none": the
    # same questions, all wrong and never stored except the unjudged one.
    questions = pd.DataFrame(
        {
            "question_id": ["ok", "w", "r", "x", "p"],
            "evidence_ids": [["e1_1"], ["e1_3"], ["e1_1"], [], ["e1_1"]],
        }
    )
    runs = {"bm25": ["e1_1"], "none": []}
    answers = pd.DataFrame(
        [
            {**RUN, "system": system, "episode_id": "e1", "question_id": qid,
             "question_type": "t", "retrieved_ids": retrieved if qid != "r" else []}
            for system, retrieved in runs.items()
            for qid in ["ok", "w", "r", "x", "p"]
        ]
    )  # fmt: skip
    judgements = pd.concat(
        [
            _judgements([("ok", "t", 1.0), ("w", "t", 0.0), ("r", "t", 0.0), ("x", "t", 0.0)])
            .assign(system="bm25"),
            _judgements([(q, "t", 0.0) for q in ["ok", "w", "r", "x"]]).assign(system="none"),
            _judgements([("p", "t", float("nan"))]).assign(system="bm25"),
            _judgements([("p", "t", float("nan"))]).assign(system="none"),
        ]
    )  # fmt: skip
    stored = pd.DataFrame(
        {"system": ["bm25", "bm25"], "episode_id": ["e1", "e1"], "turn_id": ["e1_1", "e1_2"]}
    )
    diagnosis = diagnose(answers, judgements, questions, stored)
    rows = report_rows(diagnosis_rates(diagnosis, answers, judgements))
    overall = rows[rows["question_type"] == "all"]
    shares = overall.pivot_table(index="system", columns="failure", values="rate")
    assert shares.loc["bm25"].to_dict() == pytest.approx(
        {"correct": 0.2, "write": 0.2, "read": 0.2, "utilization": 0.0}
        | {"undiagnosable": 0.2, "unjudged": 0.2}
    )
    assert shares.loc["none", "write"] == pytest.approx(0.6)  # ok, w, r: nothing stored
    assert shares.loc["none", "correct"] == 0.0
    assert overall.groupby("system")["rate"].sum().to_dict() == pytest.approx(
        {"bm25": 1.0, "none": 1.0}
    )
    assert set(overall["n"]) == {5}  # shares of all questions, not of the wrong ones


def test_diagnosis_uses_j_before_f1_for_locomo():
    questions = pd.DataFrame({"question_id": ["q"], "evidence_ids": [["D1:1"]]})
    answers = pd.DataFrame(
        [
            {
                **RUN,
                "episode_id": "c",
                "question_id": "q",
                "question_type": "single-hop",
                "retrieved_ids": ["D1:1"],
            }
        ]
    )
    judgements = pd.concat(
        [
            _judgements([("q", "single-hop", 0.2)], metric="f1"),  # low F1 ...
            _judgements([("q", "single-hop", 1.0)], metric="j"),  # ... but judged CORRECT
        ]
    )
    stored = pd.DataFrame({"episode_id": ["c"], "turn_id": ["D1:1"]})
    assert diagnose(answers, judgements, questions, stored).empty


def test_a_perfect_or_zero_score_lies_inside_its_own_interval():
    """Rounding must not put n/n just below 1 (or 0/n above 0), for any n."""
    for n in range(1, 2000):
        assert wilson_interval(n, n)[1] == 1.0 and wilson_interval(0, n)[0] == 0.0
