"""One run scored on two data versions: a worked example of every rule of
eval/static_qa/data_versions."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.eval.static_qa.data_versions import corrected_gold, score_versions

KEYS = {"benchmark": "locomo", "system": "bm25", "protocol": "qa", "step": 0}


def _question(qid, answer, evidence, erratum=None):
    meta = {"category": 2}
    if erratum:
        meta["errata"] = {"overlay": "t", "reason": "r", **erratum}
    return {
        "benchmark": "locomo",
        "question_id": qid,
        "answer": answer,
        "evidence_ids": evidence,
        "meta": json.dumps(meta),
    }


QUESTIONS = pd.DataFrame(
    [
        _question("q0", "the sunday before 25 May", ["D1:1"], {"action": "correct",
                  "answer": "the saturday before 25 May"}),
        _question("q1", "a lake", ["D1:2"], {"action": "drop"}),
        _question("q2", "2022", ["D1:3"], {"action": "evidence", "evidence": ["D1:4"]}),
        _question("q3", "pottery", ["D1:5"]),
    ]
)  # fmt: skip
ANSWERS = pd.DataFrame(
    [
        {**KEYS, "question_id": "q0", "response": "saturday before 25 May", "ranked_ids": ["D1:1"]},
        {**KEYS, "question_id": "q1", "response": "a lake", "ranked_ids": ["D1:2"]},
        {**KEYS, "question_id": "q2", "response": "2022", "ranked_ids": ["D1:3"]},
        {**KEYS, "question_id": "q3", "response": "clay", "ranked_ids": ["D1:5"]},
    ]
)
# released F1: q0 "saturday before 25 may" vs "sunday before 25 may": 3 of 4 tokens -> 0.75
JUDGEMENTS = pd.DataFrame(
    [
        {**KEYS, "question_id": q, "metric": m, "value": v}
        for q, f1, j in [("q0", 0.75, 0.0), ("q1", 1.0, 1.0), ("q2", 1.0, 1.0), ("q3", 0.0, 0.0)]
        for m, v in (("f1", f1), ("j", j))
    ]
)


def test_both_versions_of_one_run():
    table = score_versions(QUESTIONS, ANSWERS, JUDGEMENTS, recall=True).set_index("metric")
    f1 = table.loc["f1"]
    assert f1["released"] == pytest.approx((0.75 + 1 + 1 + 0) / 4)
    # q1 dropped; q0 re-scored against "the saturday before 25 May": every token matches -> 1.0
    assert f1["corrected"] == pytest.approx((1.0 + 1 + 0) / 3)
    assert (f1["n_corrected"], f1["rescored"], f1["dropped"], f1["rejudge"]) == (3, 1, 1, 0)
    j = table.loc["j"]  # q0's verdict was on the old gold: left out, counted for re-judging
    assert (j["released"], j["corrected"], j["n_corrected"], j["rejudge"]) == (0.5, 0.5, 2, 1)
    # every evidence turn was ranked; q2's corrected evidence D1:4 was not, and q1 is dropped
    recall = table.loc["turn_evidence_recall"]
    assert recall["released"] == 1.0 and recall["corrected"] == pytest.approx((1 + 0 + 1) / 3)
    assert (recall["n_corrected"], recall["rescored"], recall["dropped"]) == (3, 1, 1)


def test_rejudged_verdicts_replace_the_stale_ones():
    gold = corrected_gold(QUESTIONS)
    assert (
        list(gold["question_id"]) == ["q0"]
        and gold["answer"].iat[0] == "the saturday before 25 May"
    )
    rejudged = pd.DataFrame([{**KEYS, "question_id": "q0", "metric": "j", "value": 1.0}])
    j = (
        score_versions(QUESTIONS, ANSWERS, JUDGEMENTS, rejudged=rejudged)
        .set_index("metric")
        .loc["j"]
    )
    assert (j["corrected"], j["n_corrected"], j["rescored"], j["rejudge"]) == (
        pytest.approx(2 / 3),
        3,
        1,
        0,
    )
