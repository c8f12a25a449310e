"""LongMemEval loader on small files written in the official format (s / m / oracle layout)."""

from __future__ import annotations

import json

import pytest

from mnemoflow.cli import main
from mnemoflow.data.longmemeval import REVISION, SHA256, load, parse, parse_date, source_for
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import EPISODE_SESSIONS, QUESTIONS, SESSIONS, to_arrow
from mnemoflow.data.validate import DataError

FILLER = [
    {"role": "user", "content": "Any tips for a rainy weekend?"},
    {"role": "assistant", "content": "Board games, a museum, or baking."},
]
EVIDENCE = [
    {"role": "user", "content": "I just adopted a cat named Miso.", "has_answer": True},
    {"role": "assistant", "content": "Congratulations on adopting Miso!", "has_answer": False},
]


def official_records():
    """Three records in the released layout: a shared filler session, an int answer, an _abs."""
    records = [
        {
            "question_id": "e47becba",
            "question_type": "single-session-user",
            "question": "What is my cat's name?",
            "answer": "Miso",
            "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:05"],
            "haystack_session_ids": ["sharegpt_abc_0", "answer_4be1b6b4_1"],
            "haystack_sessions": [FILLER, EVIDENCE],
            "answer_session_ids": ["answer_4be1b6b4_1"],
        },
        {
            "question_id": "gpt4_59c863d7",
            "question_type": "multi-session",
            "question": "How many pets do I have?",
            "answer": 2,
            "question_date": "2023/06/02 (Fri) 09:00",
            "haystack_dates": ["2023/05/22 (Mon) 08:00", "2023/05/25 (Thu) 18:30"],
            "haystack_session_ids": ["sharegpt_abc_0", "answer_9f_2"],
            "haystack_sessions": [
                FILLER,
                [
                    {"role": "user", "content": "My dog Rex loves Miso."},
                    {"role": "assistant", "content": "Two pets, how fun."},
                ],
            ],
            "answer_session_ids": ["answer_9f_2"],
        },
        {
            "question_id": "e47becba_abs",
            "question_type": "single-session-user",
            "question": "What is my hamster's name?",
            "answer": "You did not mention a hamster.",
            "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_dates": ["2023/05/20 (Sat) 02:21"],
            # same id as the filler above but different content: must be disambiguated
            "haystack_session_ids": ["sharegpt_abc_0"],
            "haystack_sessions": [[{"role": "user", "content": "Different text."}]],
            "answer_session_ids": [],
        },
    ]
    return json.loads(json.dumps(records))  # fresh objects: tests edit them


@pytest.fixture()
def lme_file(tmp_path):
    path = tmp_path / "longmemeval_s_cleaned.json"
    path.write_text(json.dumps(official_records(), indent=2))
    return path


def test_dates():
    assert parse_date("2023/05/30 (Tue) 23:40") == "2023-05-30T23:40"
    assert parse_date("not a date") == "not a date"


def test_sessions_stored_once_and_mapped_per_episode(lme_file):
    p = load_benchmark({"loader": "longmemeval", "source": {"path": str(lme_file)}})
    to_arrow(p.sessions, SESSIONS)
    to_arrow(p.questions, QUESTIONS)
    to_arrow(p.episode_sessions, EPISODE_SESSIONS)
    s = p.sessions
    # the filler is stored once although two haystacks contain it; the clash gets a hash suffix
    assert s["session_id"].drop_duplicates().tolist()[:3] == [
        "sharegpt_abc_0",
        "answer_4be1b6b4_1",
        "answer_9f_2",
    ]
    clash = s["session_id"].drop_duplicates().tolist()[3]
    assert clash.startswith("sharegpt_abc_0#") and len(clash) == len("sharegpt_abc_0#") + 8
    assert len(s) == 2 + 2 + 2 + 1
    assert set(s["episode_id"]) == {""}
    assert p.notes[0].startswith("longmemeval_s_cleaned.json: 1 session ids reused")
    # official turn ids: <session_id>_<k>, k 1-based over all turns
    ev = s[s["session_id"] == "answer_4be1b6b4_1"]
    assert ev["turn_id"].tolist() == ["answer_4be1b6b4_1_1", "answer_4be1b6b4_1_2"]
    assert ev["has_evidence"].tolist() == [True, False]
    assert ev["session_time"].iloc[0] == "2023-05-21T10:05"
    e = p.episode_sessions
    first = e[e["episode_id"] == "e47becba"]
    assert first[["session_id", "session_index", "session_time"]].values.tolist() == [
        ["sharegpt_abc_0", 0, "2023-05-20T02:21"],
        ["answer_4be1b6b4_1", 1, "2023-05-21T10:05"],
    ]
    # the shared session keeps each haystack's own date in the episode map
    second = e[e["episode_id"] == "gpt4_59c863d7"]
    assert second["session_time"].tolist()[0] == "2023-05-22T08:00"


def test_questions(lme_file):
    q = parse(lme_file).questions.set_index("question_id")
    assert q.loc["e47becba", "episode_id"] == "e47becba"
    assert q.loc["e47becba", "question_time"] == "2023-05-30T23:40"
    assert list(q.loc["e47becba", "evidence_ids"]) == ["answer_4be1b6b4_1_1"]
    assert json.loads(q.loc["e47becba", "meta"]) == {
        "abstention": False,
        "answer_session_ids": ["answer_4be1b6b4_1"],
        "answer_turn_ids": ["answer_4be1b6b4_1_1"],
    }
    # int answer -> "2"; no turn marked -> evidence falls back to the answer sessions
    assert q.loc["gpt4_59c863d7", "answer"] == "2"
    assert list(q.loc["gpt4_59c863d7", "evidence_ids"]) == ["answer_9f_2"]
    # abstention: id ends in _abs, type stays the base type
    assert q.loc["e47becba_abs", "question_type"] == "single-session-user"
    assert json.loads(q.loc["e47becba_abs", "meta"])["abstention"] is True


def test_limit(lme_file):
    p = load_benchmark({"loader": "longmemeval", "source": {"path": str(lme_file)}, "limit": 1})
    assert p.questions["question_id"].tolist() == ["e47becba"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda r: r[1].update(answer=[2]),
            "longmemeval_s_cleaned.json: record 1 (gpt4_59c863d7): 'answer' must be a string or "
            "an integer or a number, got list",
        ),
        (
            lambda r: r[0].pop("haystack_dates"),
            "longmemeval_s_cleaned.json: record 0 (e47becba): missing field 'haystack_dates'",
        ),
        (
            lambda r: r[0]["haystack_sessions"][1][0].update(role="system"),
            "longmemeval_s_cleaned.json: record 0 (e47becba) haystack_sessions[1][0]: 'role' must "
            "be user or assistant, got 'system'",
        ),
        (
            lambda r: r[0]["haystack_sessions"][1][0].update(has_answer="yes"),
            "longmemeval_s_cleaned.json: record 0 (e47becba) haystack_sessions[1][0]: "
            "'has_answer' must be true/false, got string",
        ),
    ],
)
def test_bad_records(tmp_path, edit, message):
    records = official_records()
    edit(records)
    path = tmp_path / "longmemeval_s_cleaned.json"
    path.write_text(json.dumps(records))
    with pytest.raises(DataError) as info:
        parse(path)
    assert str(info.value).startswith(message)


def test_truncated_file_cli(tmp_path, capsys):
    path = tmp_path / "longmemeval_s_cleaned.json"
    text = json.dumps(official_records())
    path.write_text(text[: int(len(text) * 0.6)])
    out = tmp_path / "out"
    assert main(["data", "prepare", "longmemeval", "--path", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "longmemeval_s_cleaned.json: truncated JSON: record 1 is incomplete" in err
    assert "\n" not in err
    assert not out.exists()


def test_default_sources_are_pinned_by_commit_and_checksum(tmp_path, monkeypatch):
    """The cleaned release's files download from the pinned commit and are checked by sha256."""
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path))
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    for variant in ("s", "m", "oracle"):
        source = source_for({"variant": variant, "download": True})
        assert source["revision"] == REVISION and source["download"] is True
        assert source["sha256"] == SHA256[("cleaned", variant)]
    with pytest.raises(DataError) as info:
        load({"variant": "s", "download": True})
    folder = tmp_path / "longmemeval" / "xiaowu0162__longmemeval-cleaned" / REVISION
    assert str(info.value) == (
        "longmemeval: offline, cannot download hf://datasets/xiaowu0162/longmemeval-cleaned@"
        f"{REVISION}/longmemeval_s_cleaned.json; place the file at "
        f"{folder / 'longmemeval_s_cleaned.json'}"
    )
    original = source_for({"variant": "m", "release": "original"})
    assert original["revision"] is None and original["sha256"] is None


def test_cli_info_counts_the_cached_file_of_the_requested_variant(tmp_path, monkeypatch, capsys):
    from mnemoflow.cli import main as cli
    from mnemoflow.data.longmemeval import INFO
    from mnemoflow.data.sources import cached_path

    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path / "cache"))
    oracle = cached_path(INFO.sources["oracle"], "longmemeval")
    oracle.parent.mkdir(parents=True)
    oracle.write_text(json.dumps(official_records()))
    assert cli(["data", "info", "longmemeval", "--variant", "oracle"]) == 0
    assert f"  file: {oracle}" in capsys.readouterr().out
    assert cli(["data", "info", "longmemeval"]) == 0  # variant s: not cached, no counts
    assert "  file:" not in capsys.readouterr().out
