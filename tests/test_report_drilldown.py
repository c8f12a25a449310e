"""The per-question drill-down's data: what a reader sees of each question of each run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.data.amemgym import AmemChoice, AmemQuestion, AmemUser
from mnemoflow.eval.static_qa import diagnosis
from mnemoflow.report import drilldown as dd
from mnemoflow.report.drilldown import DrillFrames, drilldown, run_of_path, write_drilldown

RUN = {"benchmark": "locomo", "protocol": "qa", "step": 0}


def _answer(system, qid, response, retrieved, **extra):
    return {
        **RUN,
        "system": system,
        "episode_id": "conv-1",
        "question_id": qid,
        "question_type": extra.pop("question_type", "single-hop"),
        "response": response,
        "retrieved_ids": retrieved,
        "ranked_ids": retrieved,
        "context_tokens": 100,
        "model": extra.pop("model", "gpt-4o-mini"),
        "cache_hit": extra.pop("cache_hit", False),
        "tokens_in": 1_000_000,
        "tokens_out": 500_000,
        "latency_s": 0.5,
    }


def _judgement(system, qid, value, raw, metric="j", parse_ok=True):
    return {
        **RUN,
        "system": system,
        "question_id": qid,
        "question_type": "single-hop",
        "judge": "gpt-4o-mini/j-v1",
        "metric": metric,
        "value": value,
        "raw_reply": raw,
        "parse_ok": parse_ok,
    }


def make_frames(extra_questions: int = 0) -> DrillFrames:
    """Three questions of bm25 and one of full_context; ``extra_questions`` more of a ``rag`` run
    (alternately right and wrong, two question types) for paging and filtering."""
    turns = [f"D1:{i}" for i in range(1, 31)]
    answers = pd.DataFrame(
        [
            _answer("bm25", "q1", "Paris", ["D1:3", "D1:1"]),
            _answer("bm25", "q2", "blue", ["D1:2"], cache_hit=True),
            _answer("bm25", "q3", "?", [], model="unpriced-model"),
            _answer("full_context", "q1", "London", turns),  # evidence D1:25 is past the cut
        ]
    )
    judgements = pd.DataFrame(
        [
            _judgement("bm25", "q1", 1.0, '{"label": "CORRECT"}'),
            _judgement("bm25", "q1", 0.5, "0.5", metric="f1"),
            _judgement("bm25", "q2", 0.0, '{"label": "WRONG"}'),
            _judgement("bm25", "q3", None, "<garbled>", parse_ok=False),
            _judgement("full_context", "q1", 0.0, '{"label": "WRONG"}'),
        ]
    )
    questions = pd.DataFrame(
        [
            {"benchmark": "locomo", "question_id": "q1", "question": "Where?", "answer": "Paris"}
            | {"evidence_ids": ["D1:25"]},
            {"benchmark": "locomo", "question_id": "q2", "question": "Colour?", "answer": "red"}
            | {"evidence_ids": ["D1:2"]},
            {"benchmark": "locomo", "question_id": "q3", "question": "Who?", "answer": "Ann"}
            | {"evidence_ids": []},
        ]
    )
    sessions = pd.DataFrame(
        {
            "benchmark": "locomo",
            "session_id": "S1",
            "turn_id": turns,
            "turn_index": range(30),
            "role": "user",
            "speaker": "Caroline",
            "content": [f"turn {i}" for i in range(1, 31)],
        }
    )
    causes = pd.DataFrame([{**RUN, "system": "bm25", "question_id": "q2", "cause": "read_failure"}])
    extra = [f"x{i:04d}" for i in range(extra_questions)]
    if extra:
        kinds = ["single-hop", "multi-hop"]
        answers = pd.concat(
            [
                answers,
                pd.DataFrame(
                    [
                        _answer("rag", q, f"answer {q}", ["D1:1"], question_type=kinds[i % 2])
                        for i, q in enumerate(extra)
                    ]
                ),
            ],
            ignore_index=True,
        )
        judgements = pd.concat(
            [
                judgements,
                pd.DataFrame(
                    [_judgement("rag", q, float(i % 2), "x") for i, q in enumerate(extra)]
                ),
            ],
            ignore_index=True,
        )
        questions = pd.concat(
            [
                questions,
                pd.DataFrame(
                    [
                        {"benchmark": "locomo", "question_id": q, "question": f"question {q}"}
                        | {"answer": "gold", "evidence_ids": []}
                        for q in extra
                    ]
                ),
            ],
            ignore_index=True,
        )
    return DrillFrames(
        answers=answers,
        judgements=judgements,
        questions=questions,
        sessions=sessions,
        causes=causes,
    )


@pytest.fixture
def frames():
    return make_frames()


PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}


def _records(data, system):
    run = next(r for r in data.runs if r["system"] == system)
    return {r["id"]: r for r in data.chunks[run["steps"]["0"]["chunk"]]}


def test_a_record_holds_question_gold_answer_items_judge_and_cost(frames):
    data = drilldown(frames, PRICES)
    q1 = _records(data, "bm25")["q1"]
    assert (q1["q"], q1["gold"], q1["answer"]) == ("Where?", "Paris", "Paris")
    assert q1["items"] == [[1, "D1:3", "Caroline: turn 3"], [2, "D1:1", "Caroline: turn 1"]]
    assert q1["scores"] == {"j": 1.0, "f1": 0.5}
    assert q1["outcome"] == "correct"  # J decides before F1, as eval/static_qa/diagnosis.py
    assert [j["raw"] for j in q1["judge"]] == ['{"label": "CORRECT"}', "0.5"]
    # 1M tokens in at $0.15/M + 0.5M out at $0.60/M
    assert q1["cost"]["usd"] == pytest.approx(0.45)
    assert q1["cost"]["tokens_in"] == 1_000_000 and q1["cost"]["latency_s"] == 0.5


def test_outcomes_name_the_diagnosed_cause_or_say_what_is_unknown(frames):
    records = _records(drilldown(frames, PRICES), "bm25")
    assert records["q2"]["outcome"] == "read"  # wrong, and the diagnosis says why
    assert records["q3"]["outcome"] == "unjudged"  # the judge's reply never parsed
    assert records["q3"]["judge"][0]["parse_ok"] is False
    assert records["q3"]["judge"][0]["raw"] == "<garbled>"
    assert records["q2"]["cost"]["usd"] == 0.0  # a response-cache hit costs nothing
    assert records["q3"]["cost"]["usd"] is None  # no price: unknown, not zero
    q1 = _records(drilldown(frames, PRICES), "full_context")["q1"]
    assert q1["outcome"] == "wrong"  # wrong, no diagnosis given for this run


def test_a_long_context_lists_its_first_items_and_every_evidence_item(frames):
    q1 = _records(drilldown(frames, PRICES), "full_context")["q1"]
    ranks = [rank for rank, _, _ in q1["items"]]
    assert ranks == [*range(1, dd.MAX_ITEMS + 1), 25]
    assert q1["items"][-1][1:] == ["D1:25", "Caroline: turn 25"]
    assert q1["more_items"] == 30 - dd.MAX_ITEMS - 1
    assert q1["evidence"] == ["D1:25"]


def test_the_index_counts_outcomes_per_run_and_step(frames):
    data = drilldown(frames, PRICES)
    assert [(r["benchmark"], r["system"]) for r in data.runs] == [
        ("locomo", "bm25"),
        ("locomo", "full_context"),
    ]
    step = data.runs[0]["steps"]["0"]
    assert step["n"] == 3 and step["types"] == ["single-hop"]
    assert {o: n for o, n in step["outcomes"].items() if n} == {
        "correct": 1,
        "read": 1,
        "unjudged": 1,
    }


def test_the_drilldown_threshold_and_deciding_metrics_are_the_diagnosis_ones():
    assert dd.WRONG_BELOW == diagnosis.WRONG_BELOW
    assert dd.DECIDING_METRICS[: len(diagnosis.DECIDING_METRICS)] == diagnosis.DECIDING_METRICS


def test_amemgym_options_are_numbered_as_the_agent_saw_them():
    question = AmemQuestion(
        index=0,
        query="Which gym plan?",
        required_info=["fitness"],
        choices=[AmemChoice(["low"], f"plan {c}", "experience") for c in "ABCD"],
    )
    user = AmemUser("u1", "2024-01-01", {}, "", {"fitness": ["low"]}, [], [question])
    keys = {"benchmark": "amemgym", "system": "awi", "protocol": "interactive", "step": 2}
    scores = pd.DataFrame(
        [
            keys
            | {"user_id": "u1", "period": 2, "question_index": 0, "question_id": "u1_p2_q0"}
            | {"chosen_option": 0, "gold_option": 2, "correct": 0.0, "parse_ok": True}
            | {"random": 0.25, "upper_bound": 1.0, "recall_correct": 0.0, "failure": "write"}
        ]
    )
    replies = pd.DataFrame(
        [
            keys
            | {"user_id": "u1", "period": 2, "question_index": 0, "option_order": [1, 2, 3, 0]}
            | {"reply": '{"answer": 4}', "raw_replies": ['{"answer": 4}'], "model": "m"}
            | {"cache_hit": False, "tokens_in": 10, "tokens_out": 2}
        ]
    )
    frames = DrillFrames(
        amemgym_scores=scores, checkpoint_replies=replies, environments={"amemgym": [user]}
    )
    data = drilldown(frames)
    record = data.chunks["r0-s2"][0]
    # the agent saw B, C, D, A and replied 4: plan A (data.json index 0)
    assert record["options"] == ["plan B", "plan C", "plan D", "plan A"]
    assert record["answer"] == "4. plan A" and record["gold"] == "2. plan C"
    assert record["outcome"] == "write" and record["diagnosis"] == "write"
    assert record["judge"][0]["raw"] == '{"answer": 4}'
    assert record["cost"]["tokens_in"] == 10


def test_chunks_are_scripts_that_cannot_end_their_script_element(tmp_path, frames):
    frames.answers.loc[0, "response"] = "</script><script>alert(1)</script>"
    names = write_drilldown(drilldown(frames, PRICES), tmp_path, "t", "page.html")
    assert names[0] == "questions.html" and "questions/r0-s0.js" in names
    text = (tmp_path / "questions" / "r0-s0.js").read_text()
    assert "</script>" not in text
    assert text.startswith('mnemoflowChunk("r0-s0",')
    records, texts = json.loads("[" + text[len('mnemoflowChunk("r0-s0",') : -len(");\n")] + "]")
    assert records[0]["answer"] == "</script><script>alert(1)</script>"
    # each item's text once per chunk, named by its index
    assert [texts[t] for _, _, t in records[0]["items"]] == ["Caroline: turn 3", "Caroline: turn 1"]
    assert len(texts) == len(set(texts))
    page = (tmp_path / "questions.html").read_text()
    assert '<a href="../page.html">' in page and "__INDEX__" not in page


def test_run_keys_come_from_the_results_layout():
    assert run_of_path(
        "results/amemgym/awi/interactive/step3/shard1/checkpoint_replies.parquet"
    ) == {
        "benchmark": "amemgym",
        "system": "awi",
        "protocol": "interactive",
        "step": 3,
    }
    assert run_of_path("results/amemgym/awi/interactive/step3/question_scores.parquet")["step"] == 3
    assert run_of_path("elsewhere/file.parquet") is None


def test_rows_sort_by_the_numbers_in_their_ids():
    assert sorted(["q10", "q2", "q1", "conv-3_q100", "conv-3_q20"], key=dd.natural_key) == [
        "conv-3_q20",
        "conv-3_q100",
        "q1",
        "q2",
        "q10",
    ]
    frames = make_frames(extra_questions=12)
    ids = [r["id"] for r in drilldown(frames).chunks["r2-s0"]]
    assert ids[:3] == ["x0000", "x0001", "x0002"]
    for table in (frames.answers, frames.questions, frames.judgements):  # x0010 -> q10
        table["question_id"] = table["question_id"].str.replace(r"x0*(\d)", r"q\1", regex=True)
    ids = [r["id"] for r in drilldown(frames).chunks["r2-s0"]]
    assert ids == [f"q{i}" for i in range(12)]  # q2 before q10, not q0, q1, q10, q11, q2


def test_an_answer_without_its_question_is_an_error_naming_the_benchmarks():
    frames = make_frames()
    frames.answers["benchmark"] = "locomo10"  # the config's name; questions carry "locomo"
    with pytest.raises(ValueError, match=r"'q1' of benchmark 'locomo10'.*\['locomo'\]"):
        drilldown(frames)
    frames.questions = frames.questions.iloc[0:0]
    with pytest.raises(ValueError, match="benchmarks none"):
        drilldown(frames)


def test_a_locomo_adversarial_gold_is_what_the_scorer_reads_with_the_trap_beside_it(frames):
    meta = json.dumps({"category": 5, "adversarial_answer": "in June"})
    frames.questions["meta"] = [meta, "{}", json.dumps({"category": 4})]
    frames.questions.loc[0, "answer"] = ""
    q1 = _records(drilldown(frames, PRICES), "bm25")["q1"]
    assert q1["gold"].startswith("not mentioned in the conversation")
    assert '"no information available" or "not mentioned"' in q1["gold"]
    assert q1["adversarial_answer"] == "in June"
    q2 = _records(drilldown(frames, PRICES), "bm25")["q2"]
    assert q2["gold"] == "red" and "adversarial_answer" not in q2
