"""Accuracy with an honest denominator: every accuracy that unscored items can change is given
over the scored items and over all items (unscored counted wrong), with the unscored count, in
the scores of static QA, MemoryBench (workflow step and ``score`` command) and AMemGym, and in
summary.md beside the accuracy shown there."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from mnemoflow.data.amemgym import read_environment
from mnemoflow.eval.amemgym.amemgym_score import score_replies
from mnemoflow.eval.memorybench.memorybench_rescore import dataset_means
from mnemoflow.eval.static_qa.scoring import aggregate
from mnemoflow.protocols import feedback as fb
from mnemoflow.report.summary import summary_markdown
from tests.amemgym_fixtures import write_environment

KEYS = {"benchmark": "lme", "system": "bm25", "protocol": "qa", "step": 0}


def values(scores: pd.DataFrame) -> dict[tuple[str, str], tuple[float, int]]:
    return {(r["metric"], r["aggregate"]): (r["value"], r["n"]) for r in scores.to_dict("records")}


def test_static_qa_judged_metric_both_ways_and_f1_once():
    # four judged questions, one whose judge reply never parsed (NaN); F1 is never unscored
    rows = []
    for qid, qtype, value in [("a", "t1", 1.0), ("b", "t1", math.nan), ("c", "t2", 0.0),
                              ("d_abs", "t2", 1.0)]:  # fmt: skip
        base = {**KEYS, "question_id": qid, "question_type": qtype, "level": "answer"}
        rows.append({**base, "metric": "accuracy", "value": value})
        rows.append({**base, "metric": "f1", "value": 0.5})
    got = values(aggregate(pd.DataFrame(rows), "longmemeval"))
    assert got[("accuracy", "micro")] == (pytest.approx(2 / 3), 3)  # the plain metric: scored
    assert got[("accuracy:scored", "micro")] == (pytest.approx(2 / 3), 3)
    assert got[("accuracy:all", "micro")] == (pytest.approx(2 / 4), 4)
    assert got[("accuracy:unscored", "micro")] == (1.0, 4)
    assert got[("accuracy:all", "type:t1")] == (pytest.approx(0.5), 2)
    assert got[("accuracy:all", "macro")][0] == pytest.approx((0.5 + 0.5) / 2)
    assert got[("accuracy:all", "abstention")] == (1.0, 1)
    low, high = got[("accuracy:all", "ci95_low")][0], got[("accuracy:all", "ci95_high")][0]
    assert low < 0.5 < high
    assert not any(metric.startswith("f1:") for metric, _ in got)


def _metrics(judged: set[str]):
    return SimpleNamespace(is_judged=lambda dataset: dataset in judged)


def test_memorybench_step_main_score_both_ways_only_for_judged_datasets():
    # NFCats (judged, 1-5; a failed judge gives no value and counts as 1, the bottom) and
    # LexEval (ROUGE-L: never unscored)
    frame = pd.DataFrame(
        [
            ("NFCats", "score", 4.0, 4.0, True),
            ("NFCats", "score", math.nan, 1.0, False),
            ("NFCats", "score", 2.0, 2.0, True),
            ("LexEval-QA", "rougel", 0.5, 0.5, True),
        ],
        columns=["dataset", "metric", "value", "score", "parse_ok"],
    )
    rows = fb.denominator_rows(KEYS, frame, [], _metrics({"NFCats"}))
    got = values(pd.DataFrame(rows))
    assert got[("score:scored", "micro")] == (pytest.approx(3.0), 2)
    assert got[("score:all", "micro")] == (pytest.approx(7 / 3), 3)
    assert got[("score:unscored", "micro")] == (1.0, 3)
    assert got[("item_value:scored", "micro")] == (pytest.approx(3.0), 2)
    assert got[("item_value:all", "micro")] == (pytest.approx(7 / 3), 3)
    assert not any(metric.startswith("rougel") for metric, _ in got)
    assert fb.denominator_rows(KEYS, frame, [], SimpleNamespace()) == []  # no judge: no rows


def test_memorybench_score_command_dataset_rows_both_ways():
    scores = pd.DataFrame(
        [
            ("DialSim-friends", "accuracy", 1.0, True, True),
            ("DialSim-friends", "accuracy", 0.0, False, True),  # never parsed: scored 0
            ("DialSim-friends", "accuracy", 0.0, True, True),
            ("LexEval-QA", "rougel", 0.5, True, True),
        ],
        columns=["dataset", "metric", "value", "parse_ok", "primary"],
    )
    table = dataset_means(scores, "task:X").set_index(["dataset", "metric"])
    assert table.loc[("DialSim-friends", "accuracy"), "value"] == pytest.approx(1 / 3)
    assert table.loc[("DialSim-friends", "accuracy:scored"), ["value", "n"]].tolist() == [0.5, 2]
    assert table.loc[("DialSim-friends", "accuracy:all"), "value"] == pytest.approx(1 / 3)
    assert table.loc[("DialSim-friends", "accuracy:unscored"), ["value", "n"]].tolist() == [1, 3]
    assert ("LexEval-QA", "rougel:all") not in table.index


def test_amemgym_accuracy_over_parsed_replies_beside_accuracy(tmp_path):
    users = read_environment(write_environment(tmp_path))
    user = users[0]
    rows = []
    for q in user.questions:
        rows.append({"user_id": user.id, "period": 0, "question_index": q.index,
                     "reply": "no idea" if q.index == 0 else '{"answer": 1}'})  # fmt: skip
    _, scores = score_replies(users, pd.DataFrame(rows))
    mean = scores[scores["period"].isna()].set_index("metric")
    n = len(rows)
    assert mean.loc["accuracy:all", "value"] == pytest.approx(mean.loc["accuracy", "value"])
    assert mean.loc["accuracy:unscored", ["value", "n"]].tolist() == [1, n]
    parsed = mean.loc["accuracy:scored"]
    assert parsed["n"] == n - 1
    assert parsed["value"] == pytest.approx(mean.loc["accuracy", "value"] * n / (n - 1))


def _summary_row(benchmark, protocol, system, step, metric, aggregate, value, n=4):
    return {"benchmark": benchmark, "system": system, "protocol": protocol, "step": step,
            "metric": metric, "aggregate": aggregate, "value": value, "n": n}  # fmt: skip


def test_summary_shows_both_figures_where_accuracy_is_shown():
    rows = [
        _summary_row("lme", "qa", "bm25", 0, "accuracy", "micro", 2 / 3, 3),
        _summary_row("lme", "qa", "bm25", 0, "accuracy:all", "micro", 0.5),
        _summary_row("lme", "qa", "bm25", 0, "accuracy:unscored", "micro", 1.0),
        _summary_row("lme", "qa", "bm25", 0, "f1", "micro", 0.4),
        _summary_row("mb", "off_policy", "bm25", 0, "item_value", "micro", 0.3),
        _summary_row("mb", "off_policy", "bm25", 0, "item_value:scored", "micro", 0.4, 3),
        _summary_row("mb", "off_policy", "bm25", 0, "item_value:all", "micro", 0.3),
        _summary_row("mb", "off_policy", "bm25", 0, "item_value:unscored", "micro", 1.0),
    ]
    for step in (0, 1):
        for metric, value in (("accuracy", 0.5), ("accuracy:all", 0.5),
                              ("accuracy:scored", 0.75), ("accuracy:unscored", 2.0)):  # fmt: skip
            for kind in ("micro", "mean_over_periods"):
                rows.append(_summary_row("amg", "interactive", "awi", step, metric, kind,
                                         value))  # fmt: skip
    text = summary_markdown(pd.DataFrame(rows))
    static = text.split("## lme")[1].split("##")[0]
    assert static.startswith(": last step (0), 4 questions")  # not only the 3 judged
    assert "| system | accuracy | accuracy (all items) | unscored | F1 |" in static
    assert "| bm25 | 0.667 | 0.500 | 1 | 0.400 |" in static
    assert "over the questions the judge scored" in static
    feedback = text.split("### mb: score over the judged items and over all")[1]
    assert "| bm25 | off_policy | 0 | 0.400 | 0.300 | 1 |" in feedback
    interactive = text.split("### amg: accuracy over the parsed replies and over all")[1]
    assert "| awi | interactive | 1 | 0.750 | 0.500 | 2 |" in interactive
    # a benchmark whose runs have no unscored-capable metric gets no such column or table
    plain = summary_markdown(pd.DataFrame([_summary_row("loc", "qa", "x", 0, "f1", "micro", 0.1)]))
    assert "all items" not in plain and "unscored" not in plain


def test_feedback_step_writes_the_rows():
    """The workflow's feedback step scorer, with an NFCats judge that never gives a score for one
    answer (re-asked, then a counted failure at the bottom of the 1-5 scale)."""
    from mnemoflow.data.registry import load_benchmark
    from mnemoflow.eval.memorybench import memorybench_metrics
    from tests.scripted_backend import scripted_gateway
    from tests.shared_data import shared_file
    from tests.test_export import answer_rows

    spec = {
        "loader": "memorybench",
        "source": {"path": str(shared_file("memorybench", "raw", "NFCats_test.csv"))},
        "set": "dataset:NFCats",
        "configs": str(shared_file("memorybench", "configs", "datasets")),
    }
    questions = load_benchmark(spec).questions
    asked = questions[questions["split"] == "test"][:3]
    answers = answer_rows("nf", "s", "off_policy", asked, ["Short.", "An answer.", "GARBLE ME"])
    gateway, _ = scripted_gateway(
        lambda request, n: "no score here" if "GARBLE ME" in str(request.messages) else "4"
    )
    keys = {"benchmark": "nf", "system": "s", "protocol": "off_policy", "step": 0}
    empty = pd.DataFrame(columns=["role", "implicit_action", "terminated", "dialogue_id"])

    async def run():
        async with gateway:
            metrics = memorybench_metrics
            return await fb.score_step(answers, asked, empty, keys, gateway, metrics, "j")

    try:
        got = values(asyncio.run(run()).scores)
    finally:
        gateway.close()
    assert got[("item_value:unscored", "micro")] == (1.0, 3)
    assert got[("item_value:all", "micro")] == (pytest.approx((4 + 4 + 1) / 3), 3)
    assert got[("item_value:all", "micro")] == got[("item_value", "micro")]
    assert got[("item_value:scored", "micro")] == (pytest.approx(4.0), 2)
    assert got[("score:scored", "micro")] == (pytest.approx(4.0), 2)
    assert got[("score:unscored", "micro")] == (1.0, 3)
