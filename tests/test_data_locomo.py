"""LoCoMo loader on the real ``locomo10.json`` (read from the shared data folder) and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoflow.cli import main
from mnemoflow.data.locomo import normalize_evidence, parse
from mnemoflow.data.registry import load_benchmark, notes_text, records_note
from mnemoflow.data.tables import QUESTIONS, SESSIONS, to_arrow
from mnemoflow.data.validate import DataError
from tests.shared_data import SHARED_DATA, needs_shared_data

LOCOMO = SHARED_DATA / "locomo" / "locomo10.json" if SHARED_DATA else None
needs_locomo = needs_shared_data


@pytest.fixture(scope="module")
def real():
    return load_benchmark({"loader": "locomo", "source": {"path": str(LOCOMO)}})


@needs_locomo
def test_real_counts(real):
    sessions, questions = real.sessions, real.questions
    assert sessions.groupby("episode_id")["session_id"].nunique().sum() == 272
    assert len(sessions) == 5882
    assert len(questions) == 1986
    assert questions["episode_id"].nunique() == 10
    assert questions["question_type"].value_counts().to_dict() == {
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 96,
        "single-hop": 841,
        "adversarial": 446,
    }
    to_arrow(sessions, SESSIONS)
    to_arrow(questions, QUESTIONS)


@needs_locomo
def test_category_mapping_and_answers(real):
    q = real.questions.set_index("question_id")
    meta = {qid: json.loads(m) for qid, m in q["meta"].items()}
    for qid, m in meta.items():
        name = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
        assert q.loc[qid, "question_type"] == name[m["category"]]
    # conv-26 qa[1]: "When did Melanie paint a sunrise?" has the integer answer 2022
    assert q.loc["conv-26_q1", "answer"] == "2022"
    assert q.loc["conv-26_q1", "question_type"] == "temporal"
    assert list(q.loc["conv-26_q1", "evidence_ids"]) == ["D1:12"]
    # adversarial items keep the misleading answer in meta, with no gold answer text
    adversarial = q[q["question_type"] == "adversarial"]
    without_answer = adversarial[adversarial["answer"] == ""]
    assert len(without_answer) == 444
    assert all(meta[qid]["adversarial_answer"] for qid in without_answer.index)


@needs_locomo
def test_id_conventions(real):
    s = real.sessions
    first = s.iloc[0]
    assert (first["episode_id"], first["session_id"], first["turn_id"]) == (
        "conv-26",
        "conv-26_s1",
        "D1:1",
    )
    # session_1 of conv-26 is dated "1:56 pm on 8 May, 2023"
    assert first["session_time"] == "2023-05-08T13:56"
    # speaker_a (Caroline) is the user side, speaker_b (Melanie) the assistant side
    assert (first["speaker"], first["role"]) == ("Caroline", "user")
    assert s.iloc[1][["speaker", "role"]].tolist() == ["Melanie", "assistant"]
    # conv-26 has 35 session_N_date_time keys but 19 sessions: only present sessions are read
    assert s[s["episode_id"] == "conv-26"]["session_id"].nunique() == 19
    assert real.questions["question_id"].iloc[0] == "conv-26_q0"
    # evidence turns are flagged: D1:3 is evidence of conv-26_q0
    d13 = s[(s["episode_id"] == "conv-26") & (s["turn_id"] == "D1:3")]
    assert bool(d13["has_evidence"].iloc[0])
    # image turns: text + the BLIP caption
    photo = s[(s["episode_id"] == "conv-26") & (s["turn_id"] == "D1:5")]["content"].iloc[0]
    assert photo.endswith(
        "[shares a photo: a photo of a dog walking past a wall with a painting of a woman]"
    )


@needs_locomo
def test_malformed_evidence_report(real):
    q = real.questions.set_index("question_id")
    assert list(q.loc["conv-26_q37", "evidence_ids"]) == ["D8:6", "D9:17"]
    # "D:11:26" in a list of seven well-formed ids is repaired in place
    assert list(q.loc["conv-43_q18", "evidence_ids"]) == [
        "D1:14", "D2:7", "D4:7", "D5:15", "D11:26", "D20:21", "D26:36"
    ]  # fmt: skip
    assert list(q.loc["conv-50_q69", "evidence_ids"]) == ["D30:5"]
    assert list(q.loc["conv-42_q88", "evidence_ids"]) == ["D1:18", "D1:20"]
    # "D4:36" names no turn of conv-47 (session 4 has fewer turns): dropped, the rest kept
    assert list(q.loc["conv-47_q38", "evidence_ids"]) == ["D18:1", "D18:7"]
    assert json.loads(q.loc["conv-42_q88", "meta"])["raw_evidence"] == ["D1:18", "D", "D1:20"]
    normalized, dropped = real.notes
    assert normalized.startswith("locomo10.json: 6 evidence ids normalized:")
    assert dropped == (
        "locomo10.json: 3 evidence ids dropped: conv-42_q58 'D10:19' (no such turn); "
        "conv-42_q88 'D' (unreadable); conv-47_q38 'D4:36' (no such turn)"
    )


@needs_locomo
def test_the_released_file_s_gaps_are_counted_by_rule(real):
    """The released file has no question without its gold and no undated session (those are
    refused); what its rules keep or drop is counted: notes.txt, data_version, summary.md."""
    assert [t.line() for t in real.tallies] == [
        "444 adversarial questions without 'answer': kept (gold: not mentioned; "
        "adversarial_answer in meta)",
        "4 questions without evidence: kept (retrieval metrics skip them)",
        "6 evidence strings: normalized ('D8:6; D9:17', 'D:11:26', ...)",
        "2 evidence ids naming no turn: dropped (meta.raw_evidence keeps them)",
        "1 unreadable evidence ids: dropped (meta.raw_evidence keeps them)",
    ]
    assert records_note(real)["questions"] == 1986
    assert records_note(real)["questions_dropped"] == 0
    assert notes_text(real).startswith("1986 questions kept, 0 dropped by the loader's rules")


def test_normalize_evidence_examples():
    assert normalize_evidence("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert normalize_evidence("D:11:26") == ["D11:26"]
    assert normalize_evidence("D30:05") == ["D30:5"]
    assert normalize_evidence("D9:1 D4:4 D4:6") == ["D9:1", "D4:4", "D4:6"]
    assert normalize_evidence("D") == []


def _record(**qa_override):
    qa = {"question": "Where?", "answer": "Paris", "evidence": ["D1:2"], "category": 4}
    qa.update(qa_override)
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I moved to Paris"},
            ],
        },
        "qa": [qa],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


def _write(tmp_path, records) -> Path:
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(records))
    return path


def test_small_file_roundtrip(tmp_path):
    prepared = parse(_write(tmp_path, [_record()]))
    assert prepared.questions.iloc[0][["question_id", "answer"]].tolist() == ["conv-x_q0", "Paris"]
    assert prepared.sessions["has_evidence"].tolist() == [False, True]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda text: text[: len(text) // 2],
            "locomo10.json: truncated JSON: record 0 is incomplete",
        ),
        (
            lambda text: text.replace('"category": 4', '"category": 7'),
            "locomo10.json: record 0 (conv-x) qa[0]: 'category' must be 1-5, got 7",
        ),
        (
            lambda text: text.replace('"question": "Where?", ', ""),
            "locomo10.json: record 0 (conv-x) qa[0]: missing field 'question'",
        ),
        (
            lambda text: text.replace('"category": 4', '"category": "4"'),
            "locomo10.json: record 0 (conv-x) qa[0]: 'category' must be an integer, got string '4'",
        ),
    ],
)
def test_bad_input_one_line_and_nothing_written(tmp_path, capsys, mutate, message):
    path = tmp_path / "locomo10.json"
    path.write_text(mutate(json.dumps([_record()])))
    with pytest.raises(DataError) as info:
        parse(path)
    assert str(info.value).startswith(message)
    out = tmp_path / "out"
    code = main(["data", "prepare", "locomo", "--path", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert err.count("\n") == 0 and message in err
    assert not out.exists()


def test_prepare_writes_tables(tmp_path, capsys):
    path = _write(tmp_path, [_record(evidence=["D1:2", "D9:9"])])
    out = tmp_path / "out"
    assert main(["data", "prepare", "locomo", "--path", str(path), "--out", str(out)]) == 0
    notes = (out / "notes.txt").read_text().splitlines()
    assert notes[0] == "1 questions kept, 0 dropped by the loader's rules (docs/data.md)"
    assert "1 evidence ids naming no turn: dropped (meta.raw_evidence keeps them)" in notes
    assert sorted(p.name for p in out.iterdir()) == [
        "episode_sessions.parquet",
        "notes.txt",
        "questions.parquet",
        "sessions.parquet",
    ]


@needs_locomo
def test_cli_info_prints_counts(capsys):
    assert main(["data", "info", "locomo", "--path", str(LOCOMO)]) == 0
    out = capsys.readouterr().out
    assert "licence: CC BY-NC 4.0" in out
    assert "sha256 79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4" in out
    assert "  sessions: 272 distinct\n  turns: 5882\n  questions: 1986\n" in out
    assert (
        "questions per type: adversarial 446, multi-hop 282, open-domain 96, single-hop 841, "
        "temporal 321" in out
    )


def test_cli_list_names_every_loader(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("amemgym", "locomo", "longmemeval", "memorybench", "synthetic"):
        assert f"\n{name}\n" in out


@needs_locomo
def test_cli_info_counts_the_cached_copy_without_path(tmp_path, monkeypatch, capsys):
    """A file downloaded into the project cache is what `data info NAME` counts."""
    from mnemoflow.data.locomo import INFO
    from mnemoflow.data.sources import cached_path

    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path))
    assert main(["data", "info", "locomo"]) == 0
    assert "turns:" not in capsys.readouterr().out  # nothing cached: sources only
    cached = cached_path(INFO.sources["default"], "locomo")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(LOCOMO.read_bytes())
    assert main(["data", "info", "locomo"]) == 0
    out = capsys.readouterr().out
    assert f"    cached: {cached}" in out and f"  file: {cached} (2,805,274 bytes" in out
    assert "  sessions: 272 distinct\n  turns: 5882\n  questions: 1986\n" in out


def test_download_beside_loader_allows_the_pinned_default(tmp_path, monkeypatch):
    """`download: true` next to `loader:` reaches the catalogued source (offline: one line)."""
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path))
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    with pytest.raises(DataError, match=r"set source.download: true$"):
        load_benchmark({"loader": "locomo"})
    with pytest.raises(DataError, match=r"^locomo: offline, cannot download https://raw\."):
        load_benchmark({"loader": "locomo", "download": True})
