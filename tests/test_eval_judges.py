"""Judges: routing by id and type, strict reply parsing, parse failures, repeats."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math

import pytest

from mnemoflow.data.tables import JUDGEMENTS
from mnemoflow.eval.static_qa.judges import (
    judge_answers,
    judge_provenance,
    locomo_request,
    longmemeval_request,
    parse_correct_wrong,
    parse_yes_no,
)
from mnemoflow.jobs.progress import progress
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline.judge import judge_locomo, judge_longmemeval
from mnemoflow.llm.types import Completion
from tests.eval_fixtures import answers_table, locomo_tables, longmemeval_tables


def _question(qid, qtype):
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "How many days?",
        "answer": "18",
    }


def test_longmemeval_prompt_follows_the_type():
    temporal = longmemeval_request(_question("q1", "temporal-reasoning"), "19 days")
    assert "off-by-one" in temporal.messages[0]["content"]
    assert temporal.task == "judge_longmemeval" and temporal.role == "judge"
    assert temporal.fields["abstention"] is False
    update = longmemeval_request(_question("q2", "knowledge-update"), "x")
    assert "updated answer" in update.messages[0]["content"]
    preference = longmemeval_request(_question("q3", "single-session-preference"), "x")
    assert "Rubric: 18" in preference.messages[0]["content"]


def test_abstention_is_decided_by_the_id_never_by_the_type():
    request = longmemeval_request(_question("gpt4_x_abs", "temporal-reasoning"), "I don't know")
    assert request.fields["abstention"] is True
    assert "unanswerable" in request.messages[0]["content"]
    assert "off-by-one" not in request.messages[0]["content"]
    plain = longmemeval_request(_question("gpt4_x", "temporal-reasoning"), "I don't know")
    assert plain.fields["abstention"] is False


def test_unknown_longmemeval_type_is_an_error_naming_the_question():
    with pytest.raises(ValueError, match="q9: question_type 'trivia'"):
        longmemeval_request(_question("q9", "trivia"), "x")


def test_yes_no_parsing_is_strict():
    assert parse_yes_no("Yes.") == 1.0
    assert parse_yes_no("no") == 0.0
    assert parse_yes_no("  **No**, the response misses it") == 0.0
    assert parse_yes_no("The answer is yes") == 1.0
    # the first word decides; otherwise exactly one of the two words must appear
    assert parse_yes_no("Yes, no detail is missing.") == 1.0
    assert parse_yes_no("I would say yes or no") is None
    assert parse_yes_no("") is None
    assert parse_yes_no("Correct") is None


def test_correct_wrong_parsing():
    assert parse_correct_wrong("It names the same city. CORRECT") == 1.0
    assert parse_correct_wrong('{"label": "WRONG"}') == 0.0
    assert parse_correct_wrong('```json\n{"label": "CORRECT"}\n```') == 1.0
    # upper-case label wins over "correct" used in the explanation
    assert parse_correct_wrong("The date is not correct. WRONG") == 0.0
    assert parse_correct_wrong("correct") == 1.0
    assert parse_correct_wrong("CORRECT or WRONG") is None
    assert parse_correct_wrong("unsure") is None


def test_offline_longmemeval_judge_rules():
    base = {"question": "q", "reference": "18 days", "question_type": "temporal-reasoning"}
    assert judge_longmemeval({**base, "response": "It took 19 days."}) == "yes"
    assert judge_longmemeval({**base, "response": "It took 21 days."}) == "no"
    assert judge_longmemeval({**base, "response": "I don't know.", "abstention": True}) == "yes"
    assert judge_longmemeval({**base, "response": "18 days", "abstention": True}) == "no"
    update = {"question": "q", "reference": "Lisbon", "question_type": "knowledge-update"}
    assert judge_longmemeval({**update, "response": "Porto before, now Lisbon."}) == "yes"


def test_offline_locomo_judge_ends_with_a_parseable_label():
    reply = judge_locomo({"question": "q", "reference": "a sunrise", "response": "A sunrise."})
    assert parse_correct_wrong(reply) == 1.0
    reply = judge_locomo({"question": "q", "reference": "a sunrise", "response": "A lake."})
    assert parse_correct_wrong(reply) == 0.0


def _answers(benchmark, questions, responses):
    """System ``sys``'s answers: question_id -> response."""
    return answers_table(benchmark, questions, [("sys", q, r) for q, r in responses.items()])


def test_longmemeval_judgements_offline(tmp_path):
    _, _, questions = longmemeval_tables()
    answers = _answers(
        "longmemeval",
        questions,
        {
            "q_move": "You moved to Lisbon.",
            "q_cat": "Your cat is Tom.",
            "q_car_abs": "I don't know.",
        },
    )
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    out = asyncio.run(judge_answers(gateway, "longmemeval", questions, answers))
    assert list(out.columns) == JUDGEMENTS.names
    values = out.set_index("question_id")["value"].to_dict()
    assert values == {"q_move": 1.0, "q_cat": 0.0, "q_car_abs": 1.0}
    assert set(out["judge"]) == {"offline-heuristic/lme-v1"}
    assert set(out["metric"]) == {"accuracy"}
    assert out["parse_ok"].all()
    assert out.set_index("question_id")["raw_reply"]["q_move"] == "yes"
    provenance = judge_provenance(gateway, "longmemeval", 1, 0)
    assert provenance["temperature"] == 0.0 and provenance["prompt_version"] == "lme-v1"


def test_locomo_judgements_store_f1_beside_j_and_skip_j_for_category_5(tmp_path):
    _, questions = locomo_tables()
    answers = _answers(
        "locomo",
        questions,
        {"conv-1_q3": "a sunrise", "conv-1_q4": "Not mentioned in the conversation"},
    )
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    out = asyncio.run(judge_answers(gateway, "locomo", questions, answers))
    got = {(r["question_id"], r["metric"]): r["value"] for r in out.to_dict("records")}
    assert got == {
        ("conv-1_q3", "f1"): 1.0,
        ("conv-1_q3", "j"): 1.0,
        ("conv-1_q4", "f1"): 1.0,
    }
    judges = dict(zip(out["metric"], out["judge"], strict=True))
    assert judges == {"f1": "locomo-f1/official", "j": "offline-heuristic/locomo-j-v1"}


class ScriptedBackend:
    """Replies by the judged response or else by seed, one per attempt (the last one repeats).

    Lets a test see re-asks, parse failures and disagreeing repeats.
    """

    def __init__(self, replies):
        self.replies = {seed: [r] if isinstance(r, str) else list(r) for seed, r in replies.items()}
        self.calls = 0

    async def complete(self, request, spec):
        self.calls += 1
        response = request.fields.get("response")
        script = self.replies[response if response in self.replies else request.seed]
        text = script.pop(0) if len(script) > 1 else script[0]
        return Completion(text=text, model="scripted")

    async def embed(self, texts, spec):
        raise NotImplementedError

    async def aclose(self):
        return None


def test_an_unparseable_verdict_is_re_asked_and_every_reply_is_stored(tmp_path):
    _, _, questions = longmemeval_tables()
    answers = _answers("longmemeval", questions, {"q_move": "Lisbon"})
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    backend = ScriptedBackend({None: ["Maybe, hard to say.", "", "Yes."]})
    gateway._backends["judge"] = backend
    out = asyncio.run(judge_answers(gateway, "longmemeval", questions, answers))
    row = out.iloc[0]
    assert row["parse_ok"] and row["value"] == 1.0
    assert json.loads(row["raw_reply"]) == ["Maybe, hard to say.", "", "Yes."]
    assert backend.calls == 3
    totals = gateway.ledger.totals()
    assert (totals.reasks, totals.parse_failures) == (2, 0)


def test_parse_failures_are_counted_after_the_last_attempt_and_never_guessed(tmp_path):
    _, _, questions = longmemeval_tables()
    answers = _answers("longmemeval", questions, {"q_move": "Lisbon", "q_cat": "Tom"})
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    backend = ScriptedBackend({"Lisbon": ["Maybe.", "Hard to say.", "Unclear."], "Tom": "no"})
    gateway._backends["judge"] = backend
    out = asyncio.run(judge_answers(gateway, "longmemeval", questions, answers))
    failed = out[~out["parse_ok"]]
    assert len(failed) == 1 and math.isnan(failed["value"].iloc[0])
    assert json.loads(failed["raw_reply"].iloc[0]) == ["Maybe.", "Hard to say.", "Unclear."]
    judged = out[out["parse_ok"]]
    assert judged["value"].tolist() == [0.0] and judged["raw_reply"].tolist() == ["no"]
    assert gateway.ledger.totals().parse_failures == 1
    # the score counts the failure from the stored judgements, not from the ledger
    from mnemoflow.eval.static_qa.scoring import aggregate, question_scores

    scores = aggregate(question_scores(out), "longmemeval")
    count = scores[scores["metric"] == "judge_parse_failures"]
    assert count[["value", "n"]].values.tolist() == [[1.0, 2]]
    accuracy = scores[(scores["metric"] == "accuracy") & (scores["aggregate"] == "micro")]
    assert accuracy[["value", "n"]].values.tolist() == [[0.0, 1]]


def test_repeats_use_distinct_seeds_and_report_agreement(tmp_path):
    _, _, questions = longmemeval_tables()
    answers = _answers("longmemeval", questions, {"q_move": "Lisbon", "q_cat": "Miso"})
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    gateway._backends["judge"] = ScriptedBackend({7: "yes", 8: "no", 9: "yes"})
    out = asyncio.run(judge_answers(gateway, "longmemeval", questions, answers, repeats=3, seed=7))
    accuracy = out[out["metric"] == "accuracy"].set_index("question_id")
    assert accuracy["value"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert json.loads(accuracy["raw_reply"]["q_move"]) == ["yes", "no", "yes"]
    agreement = out[out["metric"] == "judge_agreement"]
    assert agreement["value"].tolist() == [0.0, 0.0]
    assert json.loads(agreement["raw_reply"].iloc[0]) == [7, 8, 9]


def test_locomo_j_request_carries_fields_for_the_offline_judge():
    request = locomo_request(
        {"question_id": "c_q1", "question": "What did Melanie paint?", "answer": "A sunrise"},
        "She painted a sunrise.",
    )
    assert request.task == "judge_locomo" and request.role == "judge"
    assert request.fields == {
        "question": "What did Melanie paint?",
        "reference": "A sunrise",
        "response": "She painted a sunrise.",
    }
    assert "CORRECT or WRONG" in request.messages[0]["content"]


def test_judging_advances_a_progress_bar_per_call_with_cache_hits(tmp_path):
    _, _, questions = longmemeval_tables()
    answers = _answers("longmemeval", questions, {"q_move": "Lisbon", "q_cat": "Miso"})
    lines, logs = [], []
    for _ in range(2):  # the second pass is answered from the cache
        log = io.StringIO()
        gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")

        def bar(total, log=log):
            return progress(total, "judge longmemeval/bm25", file=log, quiet=True, disable=False)

        asyncio.run(judge_answers(gateway, "longmemeval", questions, answers, progress=bar))
        gateway.close()
        logs.append(log.getvalue())
        lines.append(log.getvalue().splitlines()[-1])
    assert "judge longmemeval/bm25: 2/2 (100%)" in lines[0] and "cache hits 0 (0%)" in lines[0]
    assert "/?" not in logs[0]  # the total is known before the first line
    assert "2/2 (100%)" in lines[1] and "cache hits 2 (100%)" in lines[1]


def test_provenance_warns_once_when_the_judge_is_sampled(tmp_path, caplog):
    gateway = Gateway.from_config({"judge": {"temperature": 0.7}}, tmp_path / "cache.sqlite")
    with caplog.at_level(logging.WARNING, logger="mnemoflow"):
        provenance = judge_provenance(gateway, "locomo", 2, 5)
    assert provenance["temperature"] == 0.7 and provenance["prompt_version"] == "locomo-j-v1"
    assert provenance["seeds"] == [5, 6]
    assert [r.getMessage() for r in caplog.records] == [
        "judge offline-heuristic: temperature is 0.7, not 0; verdicts are sampled (set "
        "models.judge.temperature: 0 for reproducible judgements)"
    ]
    generic = judge_provenance(Gateway({}, cache_path=tmp_path / "c2.sqlite"), "generic", 1, 0)
    assert generic["prompt_version"] != "locomo-j-v1" and generic["f1"] is None
