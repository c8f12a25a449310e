"""The static QA plan's shared work (``planning.static_qa.Replays``) changes no number.

A LongMemEval-shaped file written here (haystacks drawn from a shared pool of sessions, as in the
real file) is planned as the LongMemEval-S preset plans it -- the whole history for ``none``, BM25
over sessions and over messages, and the dense systems whose prompts are rendered over the same
BM25 memories -- once with the work shared between systems and once with every unit doing its own
(nothing kept, the whole tables filtered per episode): the two plans are equal in every field,
while the shared walk renders fewer prompts.
"""

from __future__ import annotations

import json
import random

import yaml

from mnemoflow.agents import readers
from mnemoflow.lexical import terms, words
from mnemoflow.memory.bm25_index import BM25Index
from mnemoflow.planning import static_qa
from mnemoflow.planning.run import plan_run
from tests.workflow import REPO

SYSTEMS = ["long_context", "bm25_session", "dense_session", "bm25_message", "dense_message"]


def write_longmemeval(path, questions: int = 6, per_haystack: int = 5, seed: int = 0) -> None:
    """A small LongMemEval_S-shaped file: varied words, so BM25 finds some turns and misses
    others (the dense stand-in then pads with the newest messages)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(300)]

    def text(n: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(n))

    def session(turns: int, evidence: bool) -> list[dict]:
        return [
            {"role": ("user", "assistant")[k % 2], "content": text(12), "has_answer": evidence}
            for k in range(turns)
        ]

    pool = [(f"pool_{i}", session(4, False)) for i in range(12)]
    records = []
    for q in range(questions):
        picks = rng.sample(pool, per_haystack - 1)
        ids, sessions = [p[0] for p in picks], [p[1] for p in picks]
        ids.append(f"answer_{q}")
        sessions.append(session(2, True))
        records.append(
            {
                "question_id": f"q{q}",
                "question_type": "multi-session",
                "question": text(3) + "?",
                "answer": text(2),
                "question_date": "2023/06/01 (Thu) 10:00",
                "haystack_dates": [f"2023/05/{1 + i:02d} (Mon) 09:00" for i in range(len(ids))],
                "haystack_session_ids": ids,
                "haystack_sessions": sessions,
                "answer_session_ids": [f"answer_{q}"],
            }
        )
    path.write_text(json.dumps(records), encoding="utf-8")


def preset_config(data) -> dict:
    """config.yaml with the LongMemEval-S preset's benchmarks and systems on ``data`` (2
    shards; agent and judge priced as OpenAI models, so prompts are counted with their BPE)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    preset = yaml.safe_load((REPO / "configs/paper/longmemeval-s.yaml").read_text())
    for name, spec in preset["benchmarks"].items():
        spec.update(download=False, source={"path": str(data)}, shards=2)
        config["benchmarks"][name] = spec
    config["benchmarks"]["longmemeval_s"]["reader"]["top_k"] = 3
    config["systems"].update(preset["systems"])
    for name in SYSTEMS[1:]:
        config["systems"][name]["top_k"] = 3
    config["run"] = {"benchmarks": list(preset["run"]["benchmarks"]), "systems": SYSTEMS[1:]}
    openai = {"base_url": "http://127.0.0.1:9/v1", "model": "gpt-4o-2024-08-06"}
    config["models"].update(agent=dict(openai), judge=dict(openai))
    config["models"]["embedder"] = {"backend": "offline"}
    return config


def test_shared_replay_plans_what_every_unit_alone_plans(tmp_path, monkeypatch):
    write_longmemeval(tmp_path / "lme.json")
    config = preset_config(tmp_path / "lme.json")
    rendered = []
    planned_requests = readers.planned_requests

    def counting(*args, **kwargs):
        rendered.append(args[2]["question_id"])
        return planned_requests(*args, **kwargs)

    monkeypatch.setattr(static_qa, "planned_requests", counting)
    shared = plan_run(config, tmp_path).to_dict()
    shared_renders = len(rendered)

    rendered.clear()
    with monkeypatch.context() as alone:  # nothing kept, every episode cut from the whole tables
        alone.setattr(static_qa.Replays, "put", lambda self, group, key, value: None)
        alone.setattr(
            static_qa.Replays,
            "tables",
            lambda self, benchmark, data, episode: (data.sessions, data.episode_sessions),
        )
        separate = plan_run(config, tmp_path).to_dict()
    assert shared == separate
    runs = {(r["system"], r["role"]) for r in shared["runs"]}
    assert {(s, "agent") for s in SYSTEMS} <= runs and ("dense_session", "embedder") in runs
    assert shared["by_role"]["agent"]["calls"] == 5 * 6  # five systems, six questions
    # every question rendered by each unit alone; shared, dense_session reuses bm25_session's
    # prompts (the same BM25 memory, never padded) and dense_message bm25_message's where BM25
    # found its top_k
    assert len(rendered) == 5 * 6
    assert 3 * 6 <= shared_renders <= 4 * 6


def test_ascii_words_and_terms_as_before():
    text = "Tom's CAT can't find the Café's 2 keys; 我们 cat's"
    assert words(text) == ["tom's", "cat", "can't", "find", "the", "caf", "s", "2", "keys"] + [
        "我",
        "们",
        "cat's",
    ]
    assert words("Tom's CAT can't") == ["tom's", "cat", "can't"]
    assert terms("Tom's CAT can't find the cat's keys") == ["tom", "cat", "can't", "find", "cat",
                                                            "keys"]  # fmt: skip


def test_bm25_vocabulary_in_order_of_first_use():
    index = BM25Index([["b", "a", "b"], [], ["c", "a"]])
    ours = {t: i for t, i in index._vocab.items() if i < 4}  # bm25s adds its own "" after
    assert ours == {"b": 0, "a": 1, "\x00": 2, "c": 3}
    order, _ = index.search(["c"], 2)
    assert order.tolist() == [2]


def test_a_history_is_read_session_by_session_in_turn_order():
    """Rows of a session need not be adjacent: sessions in order of first row, turns by index."""
    import pandas as pd

    from mnemoflow.agents.longmemeval_reader import session_chunks

    turns = pd.DataFrame(
        {
            "session_id": ["s2", "s1", "s2", "s1"],
            "turn_id": ["s2:1", "s1:0", "s2:0", "s1:1"],
            "turn_index": [1, 0, 0, 1],
            "role": ["assistant", "user", "user", "assistant"],
            "content": [" b ", "c", "a", "d"],
            "session_time": ["t2", "t1", "t2", "t1"],
        }
    )
    chunks = session_chunks(turns)
    assert [c.source_ids for c in chunks] == [["s2:0", "s2:1"], ["s1:0", "s1:1"]]
    assert [c.time for c in chunks] == ["t2", "t1"] and chunks[0].turns[1]["content"] == "b"
    assert [c.source_ids for c in session_chunks(turns, ["s1"])] == [["s1:0", "s1:1"]]


def test_messages_carry_the_values_a_row_gives():
    """Text columns converted in one call give what iterating the rows gives (missing ones too)."""
    import numpy as np
    import pandas as pd

    from mnemoflow.memory.base import Message
    from mnemoflow.protocols.static_qa import to_messages

    turns = pd.DataFrame(
        {
            "turn_id": pd.Series(["t0", "t1"], dtype="str"),
            "session_id": pd.Series(["s", "s"], dtype="string[pyarrow]"),
            "role": ["user", "assistant"],
            "content": pd.Series(["hi", None], dtype="str"),
            "speaker": pd.Series(["Ann", np.nan], dtype=object),
            "session_time": ["2023/05/01", "2023/05/01"],
        }
    )
    rows = [
        Message(r.turn_id, r.session_id, r.role, r.content, r.speaker, r.session_time)
        for r in turns.itertuples(index=False)
    ]
    got = to_messages(turns)
    assert [repr(m) for m in got] == [repr(m) for m in rows]
    assert got[0] == Message("t0", "s", "user", "hi", "Ann", "2023/05/01")
