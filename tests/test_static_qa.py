"""The offline backend's scores reflect retrieval quality (issue: 'scores differ meaningfully')."""

import asyncio

import pytest

from mnemoflow.agents.readers import reader_config
from mnemoflow.data.registry import load_benchmark, n_steps
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import static_qa as qa
from mnemoflow.protocols.step import StepContext
from tests.eval_fixtures import longmemeval_tables
from tests.jsonl import write_jsonl

SPEC = {"loader": "synthetic", "params": {"users": 4, "periods": 2, "seed": 11}}
SYSTEMS = {
    "none": {"type": "none"},
    "full_context": {"type": "full_context", "max_tokens": 4000},
    "bm25_message": {"type": "bm25_message", "top_k": 5},
    "bm25_session": {"type": "bm25_session", "top_k": 2},
}


def _accuracy(name, tmp_path):
    prepared = load_benchmark(SPEC)
    gateway = Gateway.from_config({}, None)
    episodes = sorted(prepared.questions.episode_id.unique())

    async def run():
        previous, frames = None, []
        for step in range(n_steps(SPEC)):
            out = tmp_path / name / f"step{step}"
            await qa.ingest(
                prepared.sessions,
                prepared.episode_sessions,
                episodes,
                StepContext(SYSTEMS[name], gateway),
                step,
                previous,
                out,
            )
            questions = prepared.questions[prepared.questions.checkpoint == step]
            keys = qa.run_keys("synthetic", name, step)
            answers = await qa.answer(questions, out, StepContext(SYSTEMS[name], gateway, keys))
            frames.append(await qa.judge(answers, questions, gateway))
            previous = out
        return frames

    judgements = asyncio.run(run())
    import pandas as pd

    merged = pd.concat(judgements)
    assert merged.parse_ok.all()
    return float(merged.value.mean())


def test_memory_systems_beat_no_memory(tmp_path):
    scores = {name: _accuracy(name, tmp_path) for name in SYSTEMS}
    assert scores["none"] < 0.3
    for name in ("bm25_message", "bm25_session", "full_context"):
        assert scores[name] > scores["none"] + 0.3, scores


def test_shards_partition_episodes():
    episodes = [f"e{i}" for i in range(7)]
    shards = [qa.shard_episodes(episodes, s, 3) for s in range(3)]
    assert sorted(sum(shards, [])) == sorted(episodes)
    assert [len(s) for s in shards] == [3, 2, 2]


def _lme_answers(tmp_path, reader, system=None):
    """Ingest the LongMemEval fixture, answer with ``reader``, judge and score (one run)."""
    sessions, episodes, questions = longmemeval_tables()
    system = system or {"type": "bm25_message", "top_k": 3}
    gateway = Gateway.from_config({}, None)
    snapshot = tmp_path / "step0"
    keys = qa.run_keys("longmemeval", "bm25_message", 0)

    async def run():
        await qa.ingest(
            sessions, episodes, sorted(set(episodes.episode_id)), StepContext(system, gateway), 0,
            None, snapshot,
        )  # fmt: skip
        answers = await qa.answer(
            questions,
            snapshot,
            StepContext(system, gateway, keys),
            reader,
            sessions=sessions,
            episode_sessions=episodes,
        )
        return answers, await qa.judge(answers, questions, gateway, "longmemeval")

    answers, judgements = asyncio.run(run())
    stored, known = qa.read_stored([snapshot])
    scored = qa.score(judgements, answers, questions, sessions, "longmemeval", stored, known)
    per_question = scored.question_scores.set_index(["question_id", "level", "metric"])["value"]
    return answers.set_index("question_id"), per_question


def test_retrieval_metrics_read_the_memory_ranking_not_the_display_order(tmp_path):
    # BM25 ranks the gold turn first; the reader shows an older retrieved turn before it (date
    # order), and expands the gold user turn to its round.
    answers, per_question = _lme_answers(tmp_path, {"name": "longmemeval", "mode": "retrieval"})
    ranked = list(answers.loc["q_move", "ranked_ids"])
    shown = list(answers.loc["q_move", "retrieved_ids"])
    assert ranked[0] == "answer_s_b_1" and shown[0] != "answer_s_b_1"
    assert "answer_s_b_2" in shown and "answer_s_b_2" not in ranked  # the round expansion
    assert per_question[("q_move", "turn", "recall_any@1")] == 1.0
    assert per_question[("q_move", "turn", "ndcg_any@1")] == 1.0
    assert per_question[("q_move", "session", "recall_any@1")] == 1.0


def _log(path, rankings):
    records = [
        {"question_id": qid, "retrieval_results": {"ranked_items": [{"corpus_id": c} for c in ids]}}
        for qid, ids in rankings.items()
    ]
    return str(write_jsonl(path, records))


def test_official_retrieval_log_is_read_and_ranked_as_logged(tmp_path):
    log = _log(
        tmp_path / "log.jsonl",
        {
            "q_move": ["s_c_1", "noans_s_b_1", "s_a_1"],  # gold second, noans_ undone
            "q_cat": ["s_a_1"],
            "q_car_abs": ["s_a_3"],
            "q_porto": ["s_c_1"],
        },
    )
    reader = {"name": "longmemeval", "mode": "retrieval", "retrieval_log": log}
    answers, per_question = _lme_answers(tmp_path, reader)
    assert list(answers.loc["q_move", "ranked_ids"]) == ["s_c_1", "answer_s_b_1", "s_a_1"]
    assert "Lisbon" in answers.loc["q_move", "response"]  # read from the log's rounds
    assert per_question[("q_move", "turn", "recall_any@1")] == 0.0
    assert per_question[("q_move", "turn", "recall_any@3")] == 1.0
    assert per_question[("q_move", "turn", "ndcg_any@3")] == pytest.approx(
        1.0
    )  # rank 2: no discount
    assert per_question[("q_cat", "turn", "recall_any@1")] == 1.0


def test_retrieval_log_without_a_question_names_the_log_and_the_id(tmp_path):
    log = _log(tmp_path / "log.jsonl", {"q_move": ["answer_s_b_1"]})
    reader = {"name": "longmemeval", "mode": "retrieval", "retrieval_log": log}
    with pytest.raises(ValueError, match=r"log\.jsonl: no ranking for question_id 'q_"):
        _lme_answers(tmp_path, reader)
    with pytest.raises(ConfigError, match="retrieval_log: needs mode: retrieval"):
        reader_config({**reader, "mode": "oracle"})
    with pytest.raises(ValueError, match="retrieval_log: no such file"):
        _lme_answers(tmp_path, {**reader, "retrieval_log": str(tmp_path / "missing.jsonl")})


def test_retrieval_log_path_is_what_the_answer_rule_takes_as_input():
    reader = {"name": "longmemeval", "mode": "retrieval", "retrieval_log": "logs/bm25.jsonl"}
    assert qa.retrieval_log_path(reader) == "logs/bm25.jsonl"
    assert qa.retrieval_log_path({"name": "longmemeval", "mode": "retrieval"}) is None
    assert qa.retrieval_log_path("generic") is None and qa.retrieval_log_path(None) is None


def test_episodes_in_flight_keep_every_slot_of_the_endpoint_busy():
    # A LongMemEval episode asks one question: 16 episodes at once left half of a 32-slot
    # endpoint idle. Twice the role's concurrency, never below the default.
    from types import SimpleNamespace

    from mnemoflow.protocols.static_qa import EPISODE_CONCURRENCY, episodes_in_flight

    gateway = SimpleNamespace(specs={"agent": SimpleNamespace(concurrency=32)})
    assert episodes_in_flight(gateway, "agent") == 64
    assert episodes_in_flight(gateway, "memory_writer") == EPISODE_CONCURRENCY == 16
    assert episodes_in_flight(object(), "agent") == 16


def test_failed_answers_are_left_unscored_without_a_judge_call(tmp_path):
    """An answer whose reader prompt was not sent (over the context window) is not judged: its
    rows are unscored (value NaN, parse_ok false, no reply) and the judge asks only the rest."""
    prepared = load_benchmark(SPEC)
    gateway = Gateway.from_config({}, None)
    questions = prepared.questions[prepared.questions.checkpoint == 0]
    episodes = sorted(prepared.questions.episode_id.unique())

    async def run():
        out = tmp_path / "step0"
        await qa.ingest(
            prepared.sessions, prepared.episode_sessions, episodes,
            StepContext(SYSTEMS["none"], gateway), 0, None, out,
        )  # fmt: skip
        answers = await qa.answer(
            questions, out, StepContext(SYSTEMS["none"], gateway, qa.run_keys("s", "none", 0))
        )
        failed = {answers.question_id[0]: "prompt over the window", answers.question_id[1]: "x"}
        judge = Gateway.from_config({}, None)
        async with judge:
            frame = await qa.judge(answers, questions, judge, failed=failed)
        return answers, frame, judge

    answers, frame, judge = asyncio.run(run())
    assert len(frame) == len(answers)
    missed = frame[frame.question_id.isin(answers.question_id[:2])]
    assert missed["value"].isna().all() and not missed["parse_ok"].any()
    assert (missed["raw_reply"] == "").all()
    assert frame.drop(missed.index)["parse_ok"].all()
    assert judge.ledger.totals().calls == len(answers) - 2
    assert frame["question_id"].is_monotonic_increasing
