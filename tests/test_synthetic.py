import json

import pandas as pd
import pytest

from mnemoflow.data.registry import load_benchmark, n_steps
from mnemoflow.errors import ConfigError

SPEC = {"loader": "synthetic", "params": {"users": 3, "periods": 3, "seed": 5}}


def test_same_seed_gives_identical_tables():
    first, second = load_benchmark(SPEC), load_benchmark(SPEC)
    pd.testing.assert_frame_equal(first.sessions, second.sessions)
    pd.testing.assert_frame_equal(first.questions, second.questions)


def test_other_seed_gives_other_tables():
    other = load_benchmark({**SPEC, "params": {**SPEC["params"], "seed": 6}})
    assert not other.sessions["content"].equals(load_benchmark(SPEC).sessions["content"])


def test_gold_answer_is_the_latest_value_revealed_before_the_checkpoint():
    prepared = load_benchmark(SPEC)
    turns = prepared.sessions.set_index("turn_id")
    for q in prepared.questions.to_dict("records"):
        meta = json.loads(q["meta"])
        if q["question_type"] == "abstention":
            assert q["question_id"].endswith("_abs") and not q["evidence_ids"]
            continue
        (evidence,) = q["evidence_ids"]
        turn = turns.loc[evidence]
        assert turn["step"] <= q["checkpoint"], "evidence comes from a step already ingested"
        assert q["answer"] in turn["content"] and turn["has_evidence"]
        assert meta["history"][-1] == q["answer"]
        # No later reveal of this attribute before the checkpoint contradicts the gold value.
        later = prepared.sessions[
            (prepared.sessions.episode_id == q["episode_id"])
            & (prepared.sessions.step <= q["checkpoint"])
            & prepared.sessions.has_evidence
            & (prepared.sessions.session_index > turn["session_index"])
        ]
        phrase = q["question"].removeprefix("What is my ").removesuffix("?")
        assert not later["content"].str.contains(f"my {phrase} ", regex=False).any()
        assert q["options"][q["gold_option"]] == q["answer"]
        expected = "updated-fact" if len(set(meta["history"])) > 1 else "single-fact"
        assert q["question_type"] == expected


def test_steps_are_periods_and_every_step_has_questions():
    prepared = load_benchmark(SPEC)
    assert n_steps(SPEC) == 3
    assert sorted(prepared.questions.checkpoint.unique()) == [0, 1, 2]
    assert sorted(prepared.sessions.step.unique()) == [0, 1, 2]
    assert set(prepared.questions.question_type) == {"single-fact", "updated-fact", "abstention"}


def test_longmemeval_m_shape_is_reachable():
    spec = {"loader": "synthetic", "params": {"users": 1, "periods": 1, "sessions_per_period": 500}}
    prepared = load_benchmark(spec)
    assert prepared.sessions.session_id.nunique() == 500
    assert len(prepared.sessions) == 500 * 6


def test_unknown_parameter_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown keys \\['userz'\\]"):
        load_benchmark({"loader": "synthetic", "params": {"userz": 3}})
