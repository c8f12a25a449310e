"""LongMemEval retrieval metrics and LoCoMo evidence recall, pinned with hand-computed examples."""

from __future__ import annotations

import math

import pytest

from mnemoflow.eval.static_qa.retrieval import (
    dcg,
    evidence_recall,
    is_session_granular,
    longmemeval_gold,
    longmemeval_retrieval_rows,
    rank_metrics,
    turn_to_session_metrics,
    user_turns,
)
from tests.eval_fixtures import longmemeval_tables


def test_dcg_does_not_discount_position_two():
    # rel_1 + rel_2 / log2(2) = 1 + 1
    assert dcg([1, 1]) == 2.0
    # 0 + 0 + 1 / log2(3)
    assert dcg([0, 0, 1]) == pytest.approx(1 / math.log2(3))


def test_a_single_gold_item_at_rank_two_has_full_ndcg():
    metrics = rank_metrics(["s3", "s1", "s2"], {"s1"}, ks=(1, 3))
    assert metrics["recall_any@1"] == 0.0
    assert metrics["recall_any@3"] == 1.0
    assert metrics["ndcg_any@1"] == 0.0
    # DCG = 0 + 1/log2(2) = 1, ideal = 1
    assert metrics["ndcg_any@3"] == 1.0


def test_recall_all_and_ndcg_with_two_gold_items():
    metrics = rank_metrics(["s1", "x", "s2"], {"s1", "s2"}, ks=(1, 3))
    assert metrics["recall_any@1"] == 1.0
    assert metrics["recall_all@1"] == 0.0
    assert metrics["recall_all@3"] == 1.0
    # (1 + 0 + 1/log2(3)) / (1 + 1/log2(2)) = 1.63093 / 2
    assert metrics["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    # @1: DCG 1, ideal over min(2, 1) = 1 relevant
    assert metrics["ndcg_any@1"] == 1.0


def test_session_metrics_from_turns_widen_k_to_k_distinct_sessions():
    ranking = ["a_1", "a_3", "b_1", "a_5", "c_1"]
    metrics = turn_to_session_metrics(ranking, {"c"}, n_relevant_turns=2, ks=(2, 3))
    # k=2: a_1, a_3 cover one session -> widen to 3 turns {a, b}: c not reached
    assert metrics["recall_any@2"] == 0.0
    # k=3: widen to 5 turns {a, b, c}; a plain top-3 would have missed c
    assert metrics["recall_any@3"] == 1.0
    assert rank_metrics([r.split("_")[0] for r in ranking], {"c"}, ks=(3,))["recall_any@3"] == 0.0
    # relevances [0, 0, 0, 0, 1] -> DCG 1/log2(5); ideal over 2 relevant turns: 1 + 1 = 2
    assert metrics["ndcg_any@3"] == pytest.approx(1 / math.log2(5) / 2)


def test_turns_of_one_gold_session_each_count_in_ndcg():
    metrics = turn_to_session_metrics(["g_1", "g_3", "x_1"], {"g"}, n_relevant_turns=2, ks=(2,))
    # relevances [1, 1] over ideal [1, 1] (two user turns in g)
    assert metrics["ndcg_any@2"] == 1.0


def test_official_noans_labelling_counts_only_evidence_turns():
    ranking = ["g_2", "g_1"]
    natural = turn_to_session_metrics(ranking, {"g"}, 2, ks=(1,), gold_turns=["g_1"])
    official = turn_to_session_metrics(
        ranking, {"g"}, 1, ks=(1,), gold_turns=["g_1"], evidence_turns_only=True
    )
    assert natural["recall_any@1"] == 1.0  # g_2 is a turn of the gold session
    assert official["recall_any@1"] == 0.0  # officially g_2 is "noans_g", another session


def test_longmemeval_rows_exclude_abstention_and_assistant_only_evidence():
    sessions, _, questions = longmemeval_tables()
    rankings = {
        "q_move": ["s_a_1", "answer_s_b_1", "s_c_1"],
        "q_cat": ["s_a_3", "s_c_1", "s_a_1"],
        "q_car_abs": ["s_a_1"],
        "q_porto": ["s_c_1"],
    }
    rows = longmemeval_retrieval_rows(questions, rankings, sessions, granularity="turn", ks=(1, 3))
    assert set(rows["question_id"]) == {"q_move", "q_cat"}
    value = rows.set_index(["question_id", "level", "metric"])["value"]
    assert value[("q_move", "turn", "recall_any@1")] == 0.0
    assert value[("q_move", "turn", "ndcg_any@3")] == 1.0  # rank 2 undiscounted
    # q_cat: s_a_3 is a user turn of the gold session s_a -> session hit at rank 1
    assert value[("q_cat", "session", "recall_any@1")] == 1.0
    assert value[("q_cat", "turn", "recall_any@1")] == 0.0
    # session ndcg@3 for q_cat: sessions of [s_a_3, s_c_1, s_a_1] -> relevances [1, 0, 1]
    # (k=3 would widen, but the ranking ends at 3 turns covering 2 sessions)
    # ideal: s_a has 2 user turns -> DCG 2; actual 1 + 0 + 1/log2(3)
    assert value[("q_cat", "session", "ndcg_any@3")] == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_session_granular_retrieval_is_detected_from_whole_contiguous_sessions():
    sessions, _, questions = longmemeval_tables()
    users = user_turns(sessions)
    assert is_session_granular(["answer_s_b_1", "s_a_1", "s_a_3"], users) is False  # b has 1
    assert is_session_granular(["s_a_1", "s_a_3", "s_c_1"], users) is False
    whole = ["s_a_1", "s_a_2", "s_a_3", "s_a_4"]
    assert is_session_granular(whole, user_turns(sessions)) is True
    rows = longmemeval_retrieval_rows(questions, {"q_cat": whole}, sessions, ks=(1,))
    assert set(rows["level"]) == {"session"}
    assert rows.set_index("metric")["value"]["recall_any@1"] == 1.0


def test_session_id_rankings_give_session_rows():
    sessions, _, questions = longmemeval_tables()
    rows = longmemeval_retrieval_rows(
        questions, {"q_move": ["s_c", "answer_s_b", "s_a"]}, sessions, ks=(1, 3)
    )
    value = rows.set_index(["level", "metric"])["value"]
    assert set(rows["level"]) == {"session"}
    assert value[("session", "recall_all@1")] == 0.0
    assert value[("session", "ndcg_any@3")] == 1.0


def test_locomo_evidence_recall_is_the_share_of_evidence_retrieved():
    assert evidence_recall(["D1:3", "D2:5"], ["D1:3", "D1:4"]) == 0.5
    assert evidence_recall(["D1:3"], []) == 0.0
    assert evidence_recall([], ["D1:3"]) is None


def test_gold_from_session_ids_uses_the_flagged_user_turns():
    sessions, _, questions = longmemeval_tables()
    question = questions.set_index("question_id").loc["q_cat"].to_dict()
    question.update(evidence_ids=["s_a"], meta="{}")
    # s_a's flagged user turn is s_a_1; s_a has two user turns (s_a_1, s_a_3)
    assert longmemeval_gold(question, user_turns(sessions)) == (["s_a_1"], ["s_a"], 2)
    question.update(evidence_ids=["s_c_2"])  # assistant-side evidence only
    assert longmemeval_gold(question, user_turns(sessions)) == ([], [], 0)
