"""MemoryBench: the real registry configs, the raw LexEval-QA file, the on-disk release format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoflow.data.memorybench import official_split, registry, select
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import QUESTIONS, SESSIONS, to_arrow
from mnemoflow.data.validate import DataError
from tests.shared_data import SHARED_DATA, needs_shared_data

MB = SHARED_DATA / "memorybench" if SHARED_DATA else None
CONFIGS = MB / "configs" / "datasets" if MB else None
needs_shared = needs_shared_data


@needs_shared
def test_registry_groups_are_the_official_ones():
    reg = registry(CONFIGS)
    assert len(reg["each"]) == 28
    assert [n for n, _ in select({"domain": "Legal"}, reg)] == [
        "JuDGE",
        "LexEval-Summarization",
        "LexEval-Judge",
        "LexEval-QA",
        "WritingBench-Politics&Law",
    ]
    assert [n for n, _ in select({"task": "Short-Short"}, reg)] == ["LexEval-QA", "JRE-L", "NFCats"]
    # every dataset is in exactly one domain and one task, with the tag each.json gives it
    for kind, tag in (("domain", "domain_tag"), ("task", "task_tag")):
        members = [(n, g) for g in reg[kind] for n, _ in select({kind: g}, reg)]
        assert sorted(n for n, _ in members) == sorted(reg["each"])
        assert all(reg["each"][n][tag] == g for n, g in members)
    assert {g: len(select({"domain": g}, reg)) for g in reg["domain"]} == {
        "Open-Domain": 17,
        "Legal": 5,
        "Academic&Knowledge": 6,
    }
    with pytest.raises(DataError, match="domain.json: no domain 'Medical'"):
        select({"domain": "Medical"}, reg)


def test_official_split_rule():
    split = official_split(list(range(500)))
    assert (len(split["train"]), len(split["test"])) == (400, 100)
    assert split["test"][:5] == [327, 57, 12, 379, 140]  # random.Random(42).sample(ids, 100)
    big = official_split(list(range(2397)))  # NFCats: 500 drawn first, then ceil(20 %)
    assert (len(big["train"]), len(big["test"])) == (400, 100)


@needs_shared
def test_lexeval_qa_raw():
    p = load_benchmark(
        {
            "loader": "memorybench",
            "source": {"path": str(MB / "raw" / "LexEval-QA_5_4.jsonl")},
            "select": {"dataset": "LexEval-QA"},
            "configs": str(CONFIGS),
        }
    )
    q = p.questions
    to_arrow(q, QUESTIONS)
    assert q["split"].value_counts().to_dict() == {"train": 400, "test": 100}
    assert q[q["split"] == "test"]["question_id"].tolist()[:5] == [
        "LexEval-QA_3",
        "LexEval-QA_12",
        "LexEval-QA_13",
        "LexEval-QA_15",
        "LexEval-QA_16",
    ]
    first = q.iloc[0]
    assert (first["dataset"], first["lang"], first["question_type"]) == (
        "LexEval-QA",
        "zh",
        "Short-Short",
    )
    meta = json.loads(first["meta"])
    assert meta["test_metrics"] == ["rougel"] and meta["info"]["golden_answer"] == first["answer"]
    assert first["question"].startswith("请分析以下论述题")


LOCOMO_RECORD = {
    "sample_id": "conv-26",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "I painted a sunrise in 2022."},
        ],
    },
}
DIALSIM_TEXT = (
    "[Date: September 22, 1994, Session #1]\n\nMonica: There's nothing to tell!\n"
    "Joey: C'mon, you're going out with the guy!\n\n"
    "[Date: September 29, 1994, Session #2]\n\nRoss: Hi.\n"
)


def write_release(root: Path) -> None:
    """A tiny release in the Hub layout: dataset/<name>/{train,test} and corpus/<name>.jsonl."""
    from datasets import Dataset, DatasetDict

    def save(name, train, test):
        DatasetDict(
            {"train": Dataset.from_list(train), "test": Dataset.from_list(test)}
        ).save_to_disk(str(root / "dataset" / name))

    dialog = [{"role": "user", "content": "Why?"}, {"role": "assistant", "content": "Because."}]
    plain = [
        {
            "test_idx": i,
            "input_prompt": f"Question {i}?",
            "dataset_name": "NFCats",
            "lang": "en",
            "info": str({"golden_answer": f"Answer {i}", "category": "REASON"}),
            "dialog": str(dialog),
            "implicit_feedback": json.dumps([{"action": "like"}]),
        }
        for i in range(3)
    ]
    save("NFCats", plain[:2], plain[2:])
    info = {
        "golden_answer": 2022,
        "category": 2,
        "evidence": [LOCOMO_RECORD["conversation"]["session_1"][1]],
    }
    loco = [
        {
            "test_idx": 0,
            "input_prompt": "Above is a conversation... Question: When did Melanie paint?",
            "dataset_name": "Locomo-0",
            "lang": "en",
            "info": str(info),
            "origin_question": "When did Melanie paint a sunrise?",
            "dialog_bm25": str(dialog),
            "implicit_feedback_bm25": "[]",
            "dialog_mem0": str(dialog[:1]),
            "implicit_feedback_mem0": "[]",
        }
    ]
    save("Locomo-0", loco, [{**loco[0], "test_idx": 1}])
    chat = [
        {
            "test_idx": 0,
            "input_chat_messages": str([{"role": "user", "content": "Write a poem."}]),
            "dataset_name": "DialSim-friends",
            "lang": "en",
            "info": str({"golden_answer": "Monica"}),
            "dialog_bm25": "[]",
            "implicit_feedback_bm25": "[]",
        }
    ]
    save("DialSim-friends", chat, [{**chat[0], "test_idx": 1}])
    (root / "corpus").mkdir()
    (root / "corpus" / "Locomo-0.jsonl").write_text(
        json.dumps({"text": json.dumps(LOCOMO_RECORD)}) + "\n"
    )
    (root / "corpus" / "DialSim-friends.jsonl").write_text(
        json.dumps({"text": DIALSIM_TEXT}) + "\n"
    )


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("memorybench")
    write_release(root)
    return root


def _load(release, **select_kw):
    spec = {"loader": "memorybench", "source": {"path": str(release)}, "select": select_kw}
    if CONFIGS is not None and CONFIGS.exists():
        spec["configs"] = str(CONFIGS)
    return load_benchmark(spec)


def test_plain_dataset_on_disk(release):
    p = _load(release, dataset="NFCats")
    to_arrow(p.questions, QUESTIONS)
    q = p.questions.set_index("question_id")
    assert q["split"].to_dict() == {"NFCats_0": "train", "NFCats_1": "train", "NFCats_2": "test"}
    assert q.loc["NFCats_0", "episode_id"] == "NFCats_0"
    assert (q.loc["NFCats_0", "question"], q.loc["NFCats_0", "answer"]) == (
        "Question 0?",
        "Answer 0",
    )
    meta = json.loads(q.loc["NFCats_0", "meta"])
    assert meta["dialog"][1] == {"role": "assistant", "content": "Because."}
    assert meta["implicit_feedback"] == [{"action": "like"}]
    assert meta["info"] == {"golden_answer": "Answer 0", "category": "REASON"}
    assert p.sessions.empty


def test_corpus_datasets_on_disk(release):
    p = _load(release, dataset="Locomo-0")
    to_arrow(p.sessions, SESSIONS)
    s, q = p.sessions, p.questions.set_index("question_id")
    assert s[["episode_id", "session_id", "turn_id", "role"]].values.tolist() == [
        ["Locomo-0", "Locomo-0_s1", "D1:1", "user"],
        ["Locomo-0", "Locomo-0_s1", "D1:2", "assistant"],
    ]
    assert q.loc["Locomo-0_0", "episode_id"] == "Locomo-0"
    assert q.loc["Locomo-0_0", "answer"] == "2022"
    assert list(q.loc["Locomo-0_0", "evidence_ids"]) == ["D1:2"]
    meta = json.loads(q.loc["Locomo-0_0", "meta"])
    assert sorted(meta["dialogs"]) == ["bm25", "mem0"] and meta["implicit_feedbacks"]["bm25"] == []
    assert meta["extra"] == {"origin_question": "When did Melanie paint a sunrise?"}

    d = _load(release, dataset="DialSim-friends")
    assert d.sessions[["session_id", "session_time", "turn_id", "speaker"]].values.tolist() == [
        ["DialSim-friends_s1", "1994-09-22T00:00", "D1:1", "Monica"],
        ["DialSim-friends_s1", "1994-09-22T00:00", "D1:2", "Joey"],
        ["DialSim-friends_s2", "1994-09-29T00:00", "D2:1", "Ross"],
    ]
    dq = d.questions.set_index("question_id")
    assert dq.loc["DialSim-friends_0", "question"] == "Write a poem."


@needs_shared
def test_group_with_missing_dataset_names_the_file(release):
    with pytest.raises(DataError) as info:
        _load(release, task="Short-Short")
    assert str(info.value) == (
        f"memorybench: {release} has no dataset/LexEval-QA/dataset_dict.json; place it there"
    )


def test_bad_info_type(tmp_path):
    from datasets import Dataset, DatasetDict

    row = {"test_idx": 0, "input_prompt": "Q?", "dataset_name": "NFCats", "lang": "en", "info": 5}
    good = {**row, "test_idx": 1, "info": "{}"}
    DatasetDict(
        {"train": Dataset.from_list([row]), "test": Dataset.from_list([good])}
    ).save_to_disk(str(tmp_path / "dataset" / "NFCats"))
    with pytest.raises(DataError) as info:
        load_benchmark(
            {
                "loader": "memorybench",
                "source": {"path": str(tmp_path)},
                "select": {"dataset": "NFCats"},
            }
        )
    assert (
        str(info.value) == "NFCats/train: record 0: 'info' must be a string or an object, got int 5"
    )
