"""The four feedback protocols on a tiny set: steps, what each step's memory holds, the split asked
at every step, on-policy step k reading snapshot k-1, the seeded orders, scores and rates."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from mnemoflow.data.memorybench import dialogue_rows as released_dialogue_rows
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.synthetic_feedback import questions as synthetic_questions
from mnemoflow.data.tables import DIALOGUES, SESSIONS
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import Message, build
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols.conversation import Turn, dialogue_rows
from mnemoflow.protocols.registry import protocol_steps
from mnemoflow.protocols.step import StepContext

BM25 = {"type": "bm25_message", "top_k": 5}
METRICS = fb.metrics_module("synthetic_feedback")
SPEC = {"loader": "synthetic_feedback", "params": {"items": 4, "seed": 0}}


def keys(protocol, step, system="bm25_message"):
    return {"benchmark": "b", "system": system, "protocol": protocol, "step": step}


@pytest.fixture
def gateway():
    return Gateway.from_config({}, None)


@pytest.fixture
def tiny():
    return synthetic_questions(SPEC)


NO_SESSIONS = pd.DataFrame(columns=SESSIONS.names)


def test_step_counts_of_each_protocol():
    spec = {**SPEC, "feedback": {"batch_size": 3, "on_policy_steps": 2}}
    assert protocol_steps("off_policy", spec) == 1
    assert protocol_steps("train_performance", spec) == 1
    assert protocol_steps("stepwise_off_policy", spec) == 3  # begin + ceil(4 / 3) batches
    assert protocol_steps("on_policy", spec) == 3  # begin + 2 live steps
    assert protocol_steps("on_policy", SPEC) == 11  # the reference's 10 steps after begin


def test_stepwise_needs_the_number_of_training_items_for_other_loaders():
    with pytest.raises(ConfigError, match="feedback.train_items"):
        protocol_steps("stepwise_off_policy", {"loader": "memorybench"})
    spec = {"loader": "memorybench", "feedback": {"train_items": 250}}
    assert protocol_steps("stepwise_off_policy", spec) == 4  # begin + 100 + 100 + 50


def test_bad_feedback_settings_fail_with_the_key_named():
    with pytest.raises(ConfigError, match=r"feedback.batch_size"):
        fb.FeedbackConfig.from_spec({"feedback": {"batch_size": 0}})
    with pytest.raises(ConfigError, match=r"unknown keys \['batch'\]"):
        fb.FeedbackConfig.from_spec({"feedback": {"batch": 5}})


def test_shuffle_and_on_policy_samples_follow_the_reference_global_rng():
    ids = [f"d{i}" for i in range(10)]
    frame = pd.DataFrame({"dialogue_id": ids})
    expected = list(ids)
    random.seed(42)
    random.shuffle(expected)
    assert fb.shuffled_dialogue_ids(frame, 42) == expected
    random.seed(42)
    draws = [random.sample(range(10), 4) for _ in range(3)]
    assert [fb.on_policy_sample(10, 4, k, 42) for k in (1, 2, 3)] == draws
    assert all(len(set(d)) == 4 for d in draws)  # no repeats within a step
    assert len(set().union(*draws)) < 12  # repeats across steps
    assert fb.on_policy_sample(3, 100, 1, 42) == random.Random(42).sample(range(3), 3)


def test_stepwise_fails_when_train_items_is_below_the_dialogues_it_would_leave_out():
    # train_items 3, batch 2: the plan is begin + ceil(3 / 2) = 2 batches = 4 dialogues; the set
    # has 5, so the 5th would never be memorized: an error, not a silently shorter curve
    train = pd.DataFrame({"dialogue_id": [f"d{i}" for i in range(5)]})
    short = fb.FeedbackConfig(batch_size=2, train_items=3)
    with pytest.raises(ConfigError) as error:
        fb.step_dialogues("stepwise_off_policy", 1, train, short)
    assert str(error.value) == (
        "config benchmarks.<name>.feedback.train_items: 3, but the set has 5 training "
        "dialogues; stepwise_off_policy would never memorize the last 1"
    )
    exact = fb.FeedbackConfig(batch_size=2, train_items=5)  # begin + 3 batches: 2, 2, 1
    assert [len(fb.step_dialogues("stepwise_off_policy", k, train, exact)) for k in (1, 2, 3)] == [
        2,
        2,
        1,
    ]


def generated(tiny, gateway):
    return asyncio.run(
        fb.generate_train_dialogues(
            tiny, NO_SESSIONS, StepContext(BM25, gateway, keys("train_dialogues", 0)),
            fb.FeedbackConfig(), METRICS,
        )
    )  # fmt: skip


def chain(protocol, steps, tiny, gateway, tmp_path, train, config):
    """Run ``steps`` steps of an off-policy protocol; (manifests, answered question ids)."""
    manifests, asked = [], []
    previous = None
    for step in range(steps):
        ids = fb.step_dialogues(protocol, step, train, config)
        dialogues = fb.select_dialogues(train, ids, keys(protocol, step))
        out = tmp_path / protocol / f"step{step}"
        manifests.append(
            asyncio.run(
                fb.ingest_step(
                    protocol,
                    step,
                    dialogues,
                    tiny,
                    NO_SESSIONS,
                    StepContext(BM25, gateway),
                    previous,
                    out,
                )  # fmt: skip
            )
        )
        answers = asyncio.run(
            fb.answer_step(protocol, tiny, NO_SESSIONS, out,
                           StepContext(BM25, gateway, keys(protocol, step)), config)
        )  # fmt: skip
        asked.append(list(answers.question_id))
        previous = out
    return manifests, asked


def test_generated_training_dialogues_hold_the_users_correction(tiny, gateway):
    train = generated(tiny, gateway)
    first = train[train.dialogue_id == "synthetic-feedback_0"]
    reference = json.loads(tiny.meta[0])["reference"]
    assert list(first.role) == ["user", "assistant", "user", "assistant", "user"]
    assert list(first.implicit_action) == ["", "", "dislike", "", "like"]
    assert list(first.content)[:4] == [
        tiny.question[0], "I don't know.", f"That is not right. {reference}", reference
    ]  # fmt: skip
    assert set(train.source) == {"generated"}


def test_off_policy_memorizes_every_shuffled_dialogue_and_asks_the_test_split(
    tiny, gateway, tmp_path
):
    train = generated(tiny, gateway)
    config = fb.FeedbackConfig()
    (manifest,), (asked,) = chain("off_policy", 1, tiny, gateway, tmp_path, train, config)
    assert manifest["holds"] == {"set": fb.shuffled_dialogue_ids(train, 42)}
    assert asked == [f"synthetic-feedback_{i}" for i in (4, 5, 6, 7)]
    snapshot = tmp_path / "off_policy" / "step0"
    answers = asyncio.run(
        fb.answer_step("train_performance", tiny, NO_SESSIONS, snapshot,
                       StepContext(BM25, gateway, keys("train_performance", 0)), config)
    )  # fmt: skip
    assert list(answers.question_id) == [f"synthetic-feedback_{i}" for i in (0, 1, 2, 3)]


def test_stepwise_adds_one_batch_per_step_and_asks_the_test_split_every_step(
    tiny, gateway, tmp_path
):
    train = generated(tiny, gateway)
    config = fb.FeedbackConfig(batch_size=3)
    order = fb.shuffled_dialogue_ids(train, 42)
    manifests, asked = chain("stepwise_off_policy", 3, tiny, gateway, tmp_path, train, config)
    assert [m["holds"]["set"] for m in manifests] == [[], order[:3], order]
    test_ids = [f"synthetic-feedback_{i}" for i in (4, 5, 6, 7)]
    assert asked == [test_ids, test_ids, test_ids]


def test_memory_of_the_corrections_answers_the_test_split(tiny, gateway, tmp_path):
    train = generated(tiny, gateway)
    config = fb.FeedbackConfig()
    chain("off_policy", 1, tiny, gateway, tmp_path, train, config)
    snapshot = tmp_path / "off_policy" / "step0"
    with_memory = asyncio.run(
        fb.answer_step("off_policy", tiny, NO_SESSIONS, snapshot,
                       StepContext(BM25, gateway, keys("off_policy", 0)), config)
    )  # fmt: skip
    scored = asyncio.run(
        fb.score_step(with_memory, tiny, train, keys("off_policy", 0), gateway, METRICS, "x")
    )
    score = scored.scores.set_index(["metric", "aggregate"]).value
    assert score[("accuracy", "micro")] == 1.0
    assert score[("item_value", "dataset:synthetic-feedback")] == 1.0
    none = {"type": "none"}
    asyncio.run(
        fb.ingest_step("off_policy", 0, train, tiny, NO_SESSIONS, StepContext(none, gateway),
                       None, tmp_path / "n")
    )  # fmt: skip
    without = asyncio.run(
        fb.answer_step("off_policy", tiny, NO_SESSIONS, tmp_path / "n",
                       StepContext(none, gateway, keys("x", 0)), config)
    )  # fmt: skip
    assert set(without.response) == {"I don't know."}


def test_on_policy_step_k_converses_with_snapshot_k_minus_1(tiny, gateway, tmp_path):
    config = fb.FeedbackConfig(batch_size=2)
    empty = pd.DataFrame(columns=DIALOGUES.names)
    begin = tmp_path / "step0"
    manifest = asyncio.run(
        fb.ingest_step(
            "on_policy", 0, empty, tiny, NO_SESSIONS, StepContext(BM25, gateway), None, begin
        )
    )
    assert manifest["holds"] == {"set": []}
    step1 = asyncio.run(
        fb.live_step(
            1, tiny, begin, StepContext(BM25, gateway, keys("on_policy", 1)), config, METRICS
        )
    )
    train_ids = list(tiny[tiny.split == "train"].question_id)
    sampled = [train_ids[i] for i in fb.on_policy_sample(4, 2, 1, 42)]
    assert list(dict.fromkeys(step1.dialogue_id)) == sampled
    # the empty begin memory cannot answer: every first reaction is a dislike
    firsts = step1[(step1.role == "user") & (step1["round"] == 1)]
    assert list(firsts.implicit_action) == ["dislike", "dislike"]
    after1 = tmp_path / "step1"
    manifest = asyncio.run(
        fb.ingest_step(
            "on_policy", 1, step1, tiny, NO_SESSIONS, StepContext(BM25, gateway), begin, after1
        )
    )
    assert manifest["holds"] == {"set": sampled}
    # the same items conversed with snapshot 1 are answered right at once, and only then
    again = asyncio.run(
        fb.live_dialogues(
            tiny[tiny.question_id.isin(sampled)].to_dict("records"),
            lambda item: fb.load_snapshot(after1, StepContext(BM25, gateway))[0]["set"],
            StepContext(BM25, gateway, keys("on_policy", 2)), config, METRICS, every_round=True,
        )
    )  # fmt: skip
    firsts = again[(again.role == "user") & (again["round"] == 1)]
    assert list(firsts.implicit_action) == ["like", "like"]
    assert set(firsts.terminated) == {True}


def corpus_set():
    frame = synthetic_questions(SPEC)
    corpus_q = frame.iloc[[0]].copy()
    corpus_q["dataset"], corpus_q["episode_id"] = "Locomo-0", "Locomo-0"
    corpus_q["question_id"], corpus_q["split"] = "Locomo-0_0", "test"
    sessions = pd.DataFrame(
        [
            {"benchmark": "b", "episode_id": "Locomo-0", "session_id": "s1", "session_index": 1,
             "session_time": "", "step": 0, "turn_id": f"D1:{i}", "turn_index": i,
             "role": "user", "speaker": "Caroline", "content": text, "has_evidence": False}
            for i, text in enumerate(["I went to the support group.", "It was moving."])
        ],
        columns=SESSIONS.names,
    )  # fmt: skip
    return pd.concat([frame, corpus_q], ignore_index=True), sessions


def test_a_corpus_dataset_gets_its_own_memory_off_policy_and_shares_one_otherwise(
    gateway, tmp_path
):
    questions, sessions = corpus_set()
    train = generated(questions, gateway)
    ids = fb.shuffled_dialogue_ids(train, 42)
    dialogues = fb.select_dialogues(train, ids, keys("off_policy", 0))
    off = asyncio.run(
        fb.ingest_step("off_policy", 0, dialogues, questions, sessions,
                       StepContext(BM25, gateway), None, tmp_path / "off")
    )  # fmt: skip
    assert off["holds"] == {"set": ids, "Locomo-0": [*ids, "corpus:Locomo-0"]}
    answers = asyncio.run(
        fb.answer_step("off_policy", questions, sessions, tmp_path / "off",
                       StepContext(BM25, gateway, keys("off_policy", 0)), fb.FeedbackConfig())
    )  # fmt: skip
    episode = dict(zip(answers.question_id, answers.episode_id, strict=True))
    assert episode["Locomo-0_0"] == "Locomo-0" and episode["synthetic-feedback_4"] == "set"
    empty = pd.DataFrame(columns=DIALOGUES.names)
    begin = asyncio.run(
        fb.ingest_step("stepwise_off_policy", 0, empty, questions, sessions,
                       StepContext(BM25, gateway), None, tmp_path / "sw")
    )  # fmt: skip
    assert begin["holds"] == {"set": ["corpus:Locomo-0"]}


def test_dialogues_become_speaker_messages_one_session_each_and_skip_unparsed_turns():
    rows = pd.DataFrame(
        [
            {"dialogue_id": "q1", "role": "user", "content": "Hi", "implicit_action": ""},
            {"dialogue_id": "q1", "role": "assistant", "content": "Hello", "implicit_action": ""},
            {"dialogue_id": "q1", "role": "user", "content": "", "implicit_action": "unparsed"},
            {"dialogue_id": "q2", "role": "user", "content": "Yo", "implicit_action": ""},
        ]
    ).assign(terminated=[False, False, True, False])
    messages = fb.dialogue_messages(rows, prefix="s1:")
    assert [(m.turn_id, m.session_id, m.content) for m in messages] == [
        ("s1:q1:0", "s1:q1", "Speaker user says: Hi"),
        ("s1:q1:1", "s1:q1", "Speaker assistant says: Hello"),
        ("s1:q2:0", "s1:q2", "Speaker user says: Yo"),
    ]


def test_generated_and_released_dialogues_of_one_conversation_give_the_same_memory():
    """The user's closing turn ends the dialogue: kept in the table (rates), never memorized."""
    closing = "Great! That's correct. Thank you for your help."
    generated = [
        Turn("user", "What is the capital of Australia?", 0),
        Turn("assistant", "Sydney.", 0),
        Turn("user", "That doesn't seem quite right.", 1, "dislike"),
        Turn("assistant", "Canberra.", 1),
        Turn("user", closing, 2, "like", terminated=True),
    ]
    keys = {"dialogue_id": "WritingBench-Politics&Law:4", "source": "generated"}
    live = pd.DataFrame(dialogue_rows(generated, **keys))
    release = {
        "test_idx": 4,
        "dialog": [{"role": t.role, "content": t.content} for t in generated[:4]],
        "implicit_feedback": [
            {"round": 1, "implicit_action": "dislike", "terminated": False},
            {"round": 2, "implicit_action": "like", "terminated": True},
        ],
    }
    rows, notes = released_dialogue_rows("WritingBench-Politics&Law", release, "record 0", "e")
    data = pd.DataFrame(rows)
    assert notes == [] and closing in set(live.content)  # the table keeps the closing turn
    assert live.terminated.tolist() == data.terminated.tolist()  # same rates
    memorized = fb.dialogue_messages(live, prefix="s1:")
    assert memorized == fb.dialogue_messages(data, prefix="s1:")
    assert [m.content for m in memorized] == [
        "Speaker user says: What is the capital of Australia?",
        "Speaker assistant says: Sydney.",
        "Speaker user says: That doesn't seem quite right.",
        "Speaker assistant says: Canberra.",
    ]


def test_memorybench_retrieval_shows_retrieve_k_items_and_no_local_window(gateway):
    """rag holds 12 messages: 8 written, 4 in its local window; MemoryBench shows only retrieved
    items (retrieve_k = 5), the window only when ``show_window`` asks for it."""
    memory = build({"type": "rag", "update_batch": 2, "local_window": 4, "top_k": 30}, gateway)
    turns = [
        Message(f"d:{i}", "d", "user", f"Speaker user says: fact {i} about tea", "user")
        for i in range(12)
    ]
    asyncio.run(memory.add(turns))
    window = {f"d:{i}" for i in range(8, 12)}
    question = [Turn("user", "What about tea?")]

    def shown(show_window: bool) -> list[str]:
        assistant = fb.MemoryAssistant(memory, gateway, "en", 5, show_window=show_window)
        asyncio.run(assistant.act(question))
        return assistant.last_shown

    default = shown(fb.FeedbackConfig().show_window)
    assert len(default) == 5 and not window & set(default)
    assert window <= set(shown(True)) and len(shown(True)) == 5 + len(window)


def test_answer_prompt_is_the_references_in_both_languages():
    assert fb.answer_prompt("Q?", ["a", "b"], "en") == (
        "Context:\na\nb\n\nUser: \nQ?\n\nBased on the context provided, respond naturally and "
        "appropriately to the user's input above."
    )
    assert fb.answer_prompt("问？", ["甲"], "zh").startswith(
        "相关知识：\n甲\n\n用户输入：\n问？\n\n"
    )
    assert fb.answer_prompt("Q?", [], "en") == "Q?"


def test_feedback_rates_worked_example():
    rows = pd.DataFrame(
        [
            ("a", "user", "", False), ("a", "user", "dislike", False), ("a", "user", "like", True),
            ("b", "user", "", False), ("b", "user", "dislike", False),
            ("c", "user", "", False), ("c", "user", "unparsed", True),
        ],
        columns=["dialogue_id", "role", "implicit_action", "terminated"],
    )  # fmt: skip
    rates = fb.feedback_rates(rows)
    assert rates["like_rate"] == (0.25, 4)
    assert rates["dislike_rate"] == (0.5, 4)
    assert rates["end_rate"] == (2 / 3, 3)  # a and c ended (c by a parse failure)
    assert rates["user_parse_failures"] == (1.0, 4)


def test_scores_keep_raw_judge_replies_and_count_parse_failures(tiny, gateway):
    async def evaluate_item(question, response, gateway):
        ok = question["question_id"] != "synthetic-feedback_5"
        return SimpleNamespace(metric="score", value=4.0 if ok else 1.0,
                               raw_reply="4" if ok else "no idea", parse_ok=ok)  # fmt: skip

    metrics = SimpleNamespace(evaluate_item=evaluate_item, item_value=lambda d, s: s[0].value)
    answers = pd.DataFrame(
        {"question_id": [f"synthetic-feedback_{i}" for i in (4, 5)], "response": ["x", "y"]}
    )
    empty = pd.DataFrame(columns=DIALOGUES.names)
    scored = asyncio.run(fb.score_step(answers, tiny, empty, keys("p", 0), gateway, metrics, "j"))
    assert list(scored.judgements.raw_reply) == ["4", "no idea"]
    assert list(scored.judgements.parse_ok) == [True, False]
    table = scored.scores.set_index(["metric", "aggregate"])
    assert table.loc[("judge_parse_failures", "micro")].value == 1.0
    assert table.loc[("score", "micro")].value == 2.5
    assert table.loc[("item_value", "micro")].value == 2.5


def test_a_metric_mean_counts_only_the_items_with_a_value(tiny, gateway):
    # item 4: avg_score 0.75; item 5: the judge never parsed (value None, item_value 0 = the
    # bottom of the scale). avg_score's mean is over the 1 item that has one (n 1); item_value's
    # over both: (0.75 + 0) / 2 = 0.375 (n 2)
    async def evaluate_item(question, response, gateway):
        ok = question["question_id"] == "synthetic-feedback_4"
        return SimpleNamespace(metric="avg_score", value=0.75 if ok else None,
                               raw_reply="x", parse_ok=ok)  # fmt: skip

    def item_value(dataset, scores):
        return 0.0 if scores[0].value is None else scores[0].value

    metrics = SimpleNamespace(evaluate_item=evaluate_item, item_value=item_value)
    answers = pd.DataFrame(
        {"question_id": [f"synthetic-feedback_{i}" for i in (4, 5)], "response": ["x", "y"]}
    )
    empty = pd.DataFrame(columns=DIALOGUES.names)
    scored = asyncio.run(fb.score_step(answers, tiny, empty, keys("p", 0), gateway, metrics, "j"))
    table = scored.scores.set_index(["metric", "aggregate"])
    assert (table.loc[("avg_score", "micro")].value, table.loc[("avg_score", "micro")].n) == (
        0.75,
        1,
    )
    assert (table.loc[("item_value", "micro")].value, table.loc[("item_value", "micro")].n) == (
        0.375,
        2,
    )


def test_data_dialogues_keep_plain_and_the_systems_own_variant_of_training_items(tiny):
    def row(dialogue, system):
        return {"benchmark": "b", "system": system, "protocol": "", "step": 0, "episode_id": "e",
                "dialogue_id": dialogue, "round": 0, "role": "user", "content": "c",
                "implicit_action": "", "terminated": False, "source": "data"}  # fmt: skip

    released = pd.DataFrame(
        [row("synthetic-feedback_0", ""), row("synthetic-feedback_1", "bm25"),
         row("synthetic-feedback_1", "embedder"), row("synthetic-feedback_4", "")],
        columns=DIALOGUES.names,
    )  # fmt: skip
    kept = fb.data_dialogues(released, tiny, "bm25_message", keys("train_dialogues", 0))
    assert list(kept.dialogue_id) == ["synthetic-feedback_0", "synthetic-feedback_1"]
    assert set(kept.system) == {"bm25_message"}


def test_normalized_rows_map_the_official_summary_to_scores(tiny, monkeypatch):
    seen = {}

    def fake(values, set_name, configs_dir, stats_file):
        seen["values"] = values.to_dict("records")
        seen["args"] = (set_name, configs_dir, stats_file)
        return pd.DataFrame(
            [{"set": set_name, "dataset": "all", "metric": "average", "value": 0.5, "n": 2},
             {"set": set_name, "dataset": "LexEval-QA", "metric": "z", "value": -0.1, "n": 2}]
        )  # fmt: skip

    monkeypatch.setattr(fb, "normalize_set", fake)
    per_q = pd.DataFrame(
        {"question_id": ["synthetic-feedback_4", "synthetic-feedback_5"], "metric": "item_value",
         "value": [0.2, 0.8]}
    )  # fmt: skip
    rows = fb.normalized_rows(per_q, tiny, "domain:Legal", "cfg", "stats.json", keys("p", 0))
    assert seen["args"] == ("domain:Legal", "cfg", "stats.json")
    assert [(v["test_idx"], v["value"]) for v in seen["values"]] == [(4, 0.2), (5, 0.8)]
    assert list(zip(rows["metric"], rows["aggregate"], rows["value"], strict=True)) == [
        ("average", "normalized", 0.5),
        ("z", "normalized:LexEval-QA", -0.1),
    ]
    assert fb.set_name({"task": "Long-Short"}) == "task:Long-Short"
    assert fb.set_name("domain:Legal") == "domain:Legal"


SHARED = next(
    (p / "shared" / "data" for p in Path(__file__).resolve().parents
     if (p / "shared/data").is_dir()),
    None,
)  # fmt: skip
LOCOMO = SHARED / "locomo" / "locomo10.json" if SHARED else None


@pytest.mark.skipif(LOCOMO is None or not LOCOMO.exists(), reason="no ../shared locomo10.json")
def test_locomo_0_from_real_data_generates_rule_based_dialogues_over_its_corpus(gateway):
    prepared = load_benchmark(
        {
            "loader": "memorybench",
            "source": {"path": str(LOCOMO)},
            "set": "dataset:Locomo-0",
            "configs": str(SHARED / "memorybench" / "configs" / "datasets"),
        }
    )
    questions, sessions = prepared.questions, prepared.sessions
    assert fb.corpus_datasets(questions, sessions) == ["Locomo-0"]
    train = questions[questions.split == "train"]
    assert len(train) == 20  # sample_count 25 -> 20 / 5
    dialogues = asyncio.run(
        fb.generate_train_dialogues(
            questions, sessions, StepContext(BM25, gateway, keys("train_dialogues", 0)),
            fb.FeedbackConfig(max_rounds=2), fb.metrics_module("memorybench"),
        )
    )  # fmt: skip
    users = dialogues[dialogues.role == "user"]
    reactions = users[users["round"] == 1]
    assert len(reactions) == 20  # one rule-based verdict per training item (max_rounds 2)
    texts = {
        "like": "Great! That's correct. Thank you for the accurate answer.",
        "dislike": "That doesn't seem quite right. Could you please try again and provide a "
        "more accurate answer?",
    }
    for row in reactions.itertuples():
        assert row.content == texts[row.implicit_action]
        assert row.terminated == (row.implicit_action == "like")
    # the verdict is the official F1 > 0.5 of the first answer
    by_id = {q["question_id"]: q for q in questions.to_dict("records")}
    answers = dialogues[(dialogues.role == "assistant") & (dialogues["round"] == 0)]
    for row in answers.itertuples():
        score = asyncio.run(
            fb.metrics_module("memorybench").evaluate_item(
                by_id[row.dialogue_id], row.content, None
            )
        )
        liked = reactions[reactions.dialogue_id == row.dialogue_id].implicit_action.iloc[0]
        assert (score.value > 0.5) == (liked == "like")
