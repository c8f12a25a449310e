"""``evaluate_item_all`` dispatches every MemoryBench family to its metrics (docs/metrics.md
"Wiring"), with scripted judge replies so every number is worked out by hand."""

from __future__ import annotations

import json

import pytest

from mnemoflow.data.validate import DataError
from mnemoflow.eval.memorybench.fusion import FusionStore
from mnemoflow.eval.memorybench.memorybench_metrics import (
    ItemScore,
    evaluate_item,
    evaluate_item_all,
    item_value,
)
from mnemoflow.llm.gateway import Gateway
from tests.memorybench_release import CHECKLIST, CRITERIA, JUDGMENT, LIMITATION, QUERY
from tests.scripted_backend import replies, run, scripted_gateway


def q(dataset, info, question="Q?", test_idx=1):
    return {
        "dataset": dataset,
        "question_id": f"{dataset}:{test_idx}",
        "question": question,
        "meta": json.dumps({"info": info, "test_idx": test_idx}),
    }


async def _all(item, response, gateway, **options):
    try:
        return await evaluate_item_all(item, response, gateway, **options)
    finally:
        await gateway.aclose()


def test_writingprompts_meteor_needs_no_judge(tmp_path):
    gateway, backend = scripted_gateway(replies("unused"))
    item = q("WritingPrompts", {"golden_answer": "the cat sat on the mat"})
    # identical: 6 matches in 1 chunk, penalty 0.5 x (1/6)^3 -> 1 - 1/432
    (score,) = run(_all(item, "the cat sat on the mat", gateway))
    assert score.metric == "meteor" and score.value == pytest.approx(1 - 1 / 432)
    assert backend.requests == []


def test_hellobench_checklist_mean_of_the_points():
    reply = json.dumps(
        [
            {"checklist_id": 0, "reason": "a dragon", "evaluation_score": 1},
            {"checklist_id": 1, "reason": "autumn, not winter", "evaluation_score": 0.5},
        ]
    )
    gateway, backend = scripted_gateway(replies(reply))
    item = q("HelloBench-Academic&Knowledge-QA", {"checklist": CHECKLIST}, "Write a story.")
    (score,) = run(_all(item, "A dragon in autumn.", gateway))
    assert score == ItemScore("avg_score", 0.75, reply, True, "hellobench-checklist-v1")
    assert backend.requests[0].fields["instruction"] == "Write a story."


def test_writingbench_goes_to_the_critic_role():
    reply = '{"score": 7, "reason": "cites the statute, thin on facts"}'
    gateway, backend = scripted_gateway(replies(reply), roles=("critic",))
    item = q("WritingBench-Politics&Law", {"criteria": CRITERIA}, QUERY)
    (score,) = run(_all(item, "A memo.", gateway))
    assert score == ItemScore("score", 7.0, reply, True, "writingbench-critic-v1")
    assert backend.requests[0].role == "critic"


def test_limitgen_accuracy_and_rating():
    # one limitation: aspect yes, subtype 1 (insufficient baseline, the ground truth's), rating 4
    gateway, _ = scripted_gateway(replies("yes", "1", '{"explanation": "close", "rating": 4}'))
    item = q("LimitGen-Syn", {"category": "baseline", "ground_truth": LIMITATION})
    scores = run(_all(item, json.dumps({"limitations": ["Too few baselines."]}), gateway))
    assert [(s.metric, s.value, s.parse_ok) for s in scores] == [
        ("accuracy", 1.0, True),
        ("rating", 4.0, True),
    ]
    assert item_value("LimitGen-Syn", scores) == 4.0


def test_judge_doc_sub_metrics_then_one_fused_score_asked_once(tmp_path):
    item = q("JuDGE", {"golden_answer": JUDGMENT}, "案件事实：张某盗窃。")
    store = tmp_path / "fusion.json"
    gateway, backend = scripted_gateway(replies("6"))
    # the empty response: no sections (METEOR None), BERTScore 0 without the model, the rest 0
    scores = run(_all(item, "", gateway, fusion=store))
    values = {s.metric: s.value for s in scores}
    assert values == {
        "reasoning_meteor": None, "judge_meteor": None, "reasoning_bert_score": 0.0,
        "judge_bert_score": 0.0, "crime_recall": 0.0, "crime_precision": 0.0, "crime_f1": 0.0,
        "penalcode_index_recall": 0.0, "penalcode_index_precision": 0.0,
        "penalcode_index_f1": 0.0, "time_score": 0.0, "amount_score": 0.0,
        "llm_as_judge_score": 6.0,
    }  # fmt: skip
    assert scores[-1] == ItemScore("llm_as_judge_score", 6.0, "6", True, "judge-fusion-v1")
    assert len(backend.requests) == 1
    assert json.loads(store.read_text())["JuDGE/1/e3b0c44298fc1c14"]["raw_reply"] == "6"
    # a later summary, in a fresh process (a new store over the same file, a new gateway that
    # would answer 2): the stored score, no model call
    again, later = scripted_gateway(replies("2"))
    score = run(evaluate_item(item, "", again, fusion=FusionStore(store)))
    assert score == ItemScore("llm_as_judge_score", 6.0, "6", True, "judge-fusion-v1")
    assert later.requests == []


def test_without_a_store_the_fusion_is_asked_once_per_process():
    item = q("JuDGE", {"golden_answer": JUDGMENT}, "facts", test_idx=99)
    first, backend = scripted_gateway(replies("5"))
    assert run(_all(item, "", first))[-1].value == 5.0
    second, later = scripted_gateway(replies("9"))
    assert run(_all(item, "", second))[-1].value == 5.0 and later.requests == []


def test_concurrent_scores_of_one_item_share_one_fusion_call(tmp_path):
    import asyncio

    item = q("JuDGE", {"golden_answer": JUDGMENT}, "facts", test_idx=8)
    gateway, backend = scripted_gateway(replies("4"))
    store = FusionStore(tmp_path / "f.json")

    async def both():
        try:
            return await asyncio.gather(
                *(evaluate_item(item, "", gateway, fusion=store) for _ in range(2))
            )
        finally:
            await gateway.aclose()

    first, second = run(both())
    assert first.value == second.value == 4.0
    assert len(backend.requests) == 1


def test_an_unparseable_fusion_is_a_counted_failure_at_the_bottom_of_the_scale(tmp_path):
    item = q("JuDGE", {"golden_answer": JUDGMENT}, "facts", test_idx=7)
    gateway, backend = scripted_gateway(replies("On a scale of 1 to 10, 8"))
    scores = run(_all(item, "", gateway, fusion=tmp_path / "f.json"))
    fused = scores[-1]
    assert (fused.value, fused.parse_ok) == (None, False)
    assert len(backend.requests) == 3  # asked, re-asked twice
    assert item_value("JuDGE", scores) == 1.0


@pytest.mark.parametrize(
    ("dataset", "info", "field"),
    [
        ("HelloBench-Creative&Design", {}, "info.checklist"),
        ("WritingBench-Creative&Design", {"checklist": []}, "info.criteria"),
        ("WritingPrompts", {}, "info.golden_answer"),
        ("JRE-L", {"pr-title": "t"}, "info.pr-abstract"),
        ("IdeaBench", {"title": "t"}, "info.abstract"),
        ("LimitGen-Syn", {"category": "baseline"}, "info.ground_truth"),
    ],
)
def test_a_record_without_its_metric_fields_names_record_and_field(dataset, info, field):
    gateway = Gateway.from_config({})
    with pytest.raises(DataError) as error:
        run(_all(q(dataset, info), "x", gateway))
    assert str(error.value) == f"questions: record {dataset}:1: missing field '{field}'"


def test_a_limitgen_record_with_an_unknown_error_type():
    gateway = Gateway.from_config({})
    item = q("LimitGen-Syn", {"category": "typo", "ground_truth": "x"})
    with pytest.raises(DataError, match="LimitGen-Syn:1: field 'info.category': 'typo' is not"):
        run(_all(item, "x", gateway))


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            {"golden_answer": "x", "category": "five"},
            "questions: record Locomo-0:1: field 'info.category': 'five' is not one of 1-5",
        ),
        (
            {"golden_answer": "x", "category": 7},
            "questions: record Locomo-0:1: field 'info.category': 7 is not one of 1-5",
        ),
        (
            {"golden_answer": "Not mentioned", "category": 5},
            "questions: record Locomo-0:1: field 'info.golden_answer': a category-5 gold must be "
            'the options object {"a": ..., "b": ...} (or its JSON text)',
        ),
    ],
)
def test_a_locomo_record_with_a_bad_category_or_option_gold_names_record_and_field(info, message):
    gateway = Gateway.from_config({})
    with pytest.raises(DataError) as error:
        run(_all(q("Locomo-0", info), "a", gateway))
    assert str(error.value) == message
