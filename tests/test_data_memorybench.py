"""MemoryBench: the real registry configs, the raw LexEval-QA file, the on-disk release format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoflow.data.memorybench import (
    dialog_key,
    dialogue_rows,
    dialogues_for,
    dialsim_rows,
    official_split,
    parse_set,
    registry,
    select,
)
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import DIALOGUES, QUESTIONS, SESSIONS, to_arrow
from mnemoflow.data.validate import DataError
from tests.shared_data import SHARED_DATA, needs_shared_data

MB = SHARED_DATA / "memorybench" if SHARED_DATA else None
CONFIGS = MB / "configs" / "datasets" if MB else None
needs_shared = needs_shared_data


def load_raw(path: Path, set_name: str):
    """A raw file of the real data, loaded as ``set_name`` with the real registry configs."""
    spec = {"loader": "memorybench", "source": {"path": str(path)}, "set": set_name}
    return load_benchmark({**spec, "configs": str(CONFIGS)})


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
    # Random(42).sample(range(500), 250) starts 327, 57, 12, 379, 140; a fresh Random(42).sample
    # of those 250, ceil(0.2 * 250) = 50 of them, starts 128, 332, 114; train keeps sampled order
    # without the test ids (57 is a test id).
    split = official_split(list(range(500)), 250)
    assert (len(split["train"]), len(split["test"])) == (200, 50)
    assert split["test"][:3] == [128, 332, 114]
    assert split["train"][:3] == [327, 12, 379]
    # no sample_count, or fewer items than it: every id in file order, ceil(20 %) to test
    small = official_split(list(range(7)), 25)
    assert (len(small["train"]), len(small["test"])) == (5, 2)
    assert small["train"] == sorted(small["train"])


def test_sets_parse_and_take_sample_count_from_the_groups():
    assert parse_set("domain:Legal") == {"domain": "Legal"}
    assert parse_set("dataset:Locomo-0") == {"dataset": "Locomo-0"}
    with pytest.raises(DataError, match="set 'Legal': expected KIND:NAME"):
        parse_set("Legal")
    with pytest.raises(DataError, match="set 'group:Legal'"):
        parse_set("group:Legal")


@needs_shared
def test_dataset_alone_gets_its_group_sample_count():
    reg = registry(CONFIGS)
    ((name, entry),) = select("dataset:LexEval-QA", reg)
    assert (name, entry["sample_count"]) == ("LexEval-QA", 250)
    assert select("dataset:Locomo-7", reg)[0][1]["sample_count"] == 25
    assert select("dataset:DialSim-theoffice", reg)[0][1]["sample_count"] == 84


@needs_shared
def test_lexeval_qa_raw():
    p = load_raw(MB / "raw" / "LexEval-QA_5_4.jsonl", "dataset:LexEval-QA")
    q = p.questions
    to_arrow(q, QUESTIONS)
    assert q["split"].value_counts().to_dict() == {"train": 200, "test": 50}
    # train in sampled order, then test in sampled order (see test_official_split_rule)
    assert q["question_id"].tolist()[:3] == ["LexEval-QA:327", "LexEval-QA:12", "LexEval-QA:379"]
    test = q[q["split"] == "test"]
    assert test["question_id"].tolist()[:3] == [
        "LexEval-QA:128",
        "LexEval-QA:332",
        "LexEval-QA:114",
    ]
    assert "LexEval-QA:56" in set(test["question_id"])  # the long item ROUGE-L is pinned on
    first = q.iloc[0]
    assert (first["dataset"], first["lang"], first["question_type"]) == (
        "LexEval-QA",
        "zh",
        "Short-Short",
    )
    assert first["episode_id"] == "LexEval-QA:327"
    meta = json.loads(first["meta"])
    assert meta["test_metrics"] == ["rougel"] and meta["info"]["golden_answer"] == first["answer"]
    assert (meta["test_idx"], meta["sample_count"]) == (327, 250)
    assert first["question"].startswith("请分析以下论述题")
    assert p.dialogues.empty and list(p.dialogues.columns) == DIALOGUES.names


@needs_shared
def test_a_raw_file_needs_the_registry():
    spec = {
        "loader": "memorybench",
        "source": {"path": str(MB / "raw" / "NFCats_test.csv")},
        "set": "dataset:NFCats",
    }
    with pytest.raises(DataError) as info:
        load_benchmark(spec)
    assert str(info.value) == (
        "NFCats_test.csv: a raw file needs 'configs' (the registry's sample_count decides "
        "its split)"
    )


@needs_shared
def test_nfcats_raw_csv():
    p = load_raw(MB / "raw" / "NFCats_test.csv", "dataset:NFCats")
    q = p.questions.set_index("question_id")
    assert p.questions["split"].value_counts().to_dict() == {"train": 200, "test": 50}
    # 2397 rows; Random(42).sample(range(2397), 250) then Random(42).sample(those, 50)
    assert p.questions[p.questions["split"] == "test"]["question_id"].tolist()[:3] == [
        "NFCats:1529",
        "NFCats:1138",
        "NFCats:419",
    ]
    assert p.questions["question_id"].tolist()[:3] == ["NFCats:456", "NFCats:1126", "NFCats:1003"]
    assert q.loc["NFCats:456", "question"] == (  # csv row 456
        "Please answer the following non-factoid question in English. \n"
        "Keep your answer concise and informative, and do not exceed 200 words.\n\n"
        "Question: ironside meaning"
    )
    assert q.loc["NFCats:1529", "answer"] == ""


@needs_shared
def test_locomo_corpus_dataset_from_locomo10():
    p = load_raw(SHARED_DATA / "locomo/locomo10.json", "dataset:Locomo-0")
    to_arrow(p.sessions, SESSIONS)
    q = p.questions.set_index("question_id")
    # 199 QAs; Random(42).sample(range(199), 25) -> test = Random(42).sample(those, 5)
    assert p.questions[p.questions["split"] == "test"].index.size == 5
    assert list(p.questions[p.questions["split"] == "test"]["question_id"]) == [
        "Locomo-0:129",
        "Locomo-0:189",
        "Locomo-0:163",
        "Locomo-0:143",
        "Locomo-0:188",
    ]
    assert set(p.questions["episode_id"]) == {"Locomo-0"}
    assert q.loc["Locomo-0:129", "answer"] == "Brave by Sara Bareilles"
    # category 5 items alternate option order from the first one (152: (a) not mentioned);
    # 189 is the 38th, so its option (a) is the adversarial answer
    assert json.loads(q.loc["Locomo-0:189", "answer"]) == {
        "a": "Read a book and paint.",
        "b": "Not mentioned in the conversation",
    }
    assert q.loc["Locomo-0:189", "question"].startswith(
        "Above is a conversation between two people: Caroline and Melanie."
    )
    assert q.loc["Locomo-0:189", "question"].endswith(
        "Question: What does Caroline do to keep herself busy during her pottery break? Select "
        "the correct answer: (a) Read a book and paint. (b) Not mentioned in the conversation. "
        " Short answer:\n"
    )
    meta = json.loads(q.loc["Locomo-0:129", "meta"])
    assert meta["info"]["category"] == 4 and meta["info"]["evidence"][0]["dia_id"] == "D15:23"
    assert list(q.loc["Locomo-0:129", "evidence_ids"]) == ["D15:23"]
    s = p.sessions
    assert s["episode_id"].unique().tolist() == ["Locomo-0"]
    assert s["session_id"].nunique() == 19
    assert s[s["turn_id"] == "D15:23"]["has_evidence"].tolist() == [True]


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

    # three answers, two feedback turns: a dislike that continues, then a like that continues
    dialog = [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because."},
        {"role": "user", "content": "Be more specific."},
        {"role": "assistant", "content": "Because of X."},
        {"role": "user", "content": "Thanks, and Y?"},
        {"role": "assistant", "content": "Y too."},
    ]
    feedback = [
        {"round": 1, "implicit_action": "dislike", "terminated": False},
        {"round": 2, "implicit_action": "like", "terminated": False},
    ]
    plain = [
        {
            "test_idx": i,
            "input_prompt": f"Question {i}?",
            "dataset_name": "NFCats",
            "lang": "en",
            "info": str({"golden_answer": f"Answer {i}", "category": "REASON"}),
            "dialog": str(dialog),
            "implicit_feedback": json.dumps(feedback),
        }
        for i in range(3)
    ]
    save("NFCats", plain[:2], plain[2:])
    info = {
        "golden_answer": 2022,
        "category": 2,
        "evidence": [LOCOMO_RECORD["conversation"]["session_1"][1]],
    }
    # reading.py keeps the retrieval-augmented first turn, with the raw one in origin_content;
    # the user liked the first answer and ended the dialogue (no user text in the release)
    augmented = [
        {
            "role": "user",
            "content": "Context:\nSpeaker Melanie says: ...\n\nUser: \nWhen did Melanie paint?",
            "origin_content": "When did Melanie paint?",
        },
        {"role": "assistant", "content": "In 2022."},
    ]
    ended = [{"round": 1, "implicit_action": "like", "terminated": True}]
    loco = [
        {
            "test_idx": 0,
            "input_prompt": "Above is a conversation... Question: When did Melanie paint?",
            "dataset_name": "Locomo-0",
            "lang": "en",
            "info": str(info),
            "origin_question": "When did Melanie paint a sunrise?",
            "dialog_bm25": str(augmented),
            "implicit_feedback_bm25": str(ended),
            "dialog_mem0": str(augmented[:1] + [{"role": "assistant", "content": "2021"}]),
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
    assert q["split"].to_dict() == {"NFCats:0": "train", "NFCats:1": "train", "NFCats:2": "test"}
    assert q.loc["NFCats:0", "episode_id"] == "NFCats:0"
    assert (q.loc["NFCats:0", "question"], q.loc["NFCats:0", "answer"]) == (
        "Question 0?",
        "Answer 0",
    )
    meta = json.loads(q.loc["NFCats:0", "meta"])
    assert meta["info"] == {"golden_answer": "Answer 0", "category": "REASON"}
    assert "dialog" not in meta and "implicit_feedback" not in meta
    assert p.sessions.empty


def test_training_dialogues_become_the_dialogues_table(release):
    d = _load(release, dataset="NFCats").dialogues
    to_arrow(d, DIALOGUES)
    # only the training split's dialogues (items 0 and 1), six turns each
    assert d["dialogue_id"].value_counts().to_dict() == {"NFCats:0": 6, "NFCats:1": 6}
    one = d[d["dialogue_id"] == "NFCats:0"]
    assert one[["round", "role", "implicit_action", "terminated"]].values.tolist() == [
        [0, "user", "", False],
        [0, "assistant", "", False],
        [1, "user", "dislike", False],
        [1, "assistant", "", False],
        [2, "user", "like", False],
        [2, "assistant", "", False],
    ]
    assert one["content"].tolist()[2] == "Be more specific."
    assert set(one["source"]) == {"data"} and set(one["system"]) == {""}
    assert set(one["episode_id"]) == {"NFCats:0"} and set(one["step"]) == {0}


def test_corpus_dialogues_keep_every_system_variant(release):
    d = _load(release, dataset="Locomo-0").dialogues
    to_arrow(d, DIALOGUES)
    assert sorted(d["system"].unique()) == ["bm25", "mem0"]
    bm25 = d[d["system"] == "bm25"]
    # the raw question (origin_content), not the retrieval-augmented prompt; the terminating
    # like is a user turn with no text
    assert bm25[["round", "role", "content", "implicit_action", "terminated"]].values.tolist() == [
        [0, "user", "When did Melanie paint?", "", False],
        [0, "assistant", "In 2022.", "", False],
        [1, "user", "", "like", True],
    ]
    assert set(d["episode_id"]) == {"Locomo-0"} and set(d["dialogue_id"]) == {"Locomo-0:0"}
    chosen = dialogues_for(d, "agentic_external")
    assert chosen["content"].tolist() == ["When did Melanie paint?", "2021"]
    assert dialogues_for(d, "full_context")["system"].unique().tolist() == ["bm25"]


def test_chat_input_with_earlier_turns_is_round_0():
    """Feedback rounds count from the first generated answer, not from turns inside the input."""
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Write a poem."},
    ]
    dialog = [*chat, {"role": "assistant", "content": "Roses."}]
    dialog += [{"role": "user", "content": "Longer."}, {"role": "assistant", "content": "Roses..."}]
    row = {
        "test_idx": 4,
        "input_chat_messages": str(chat),
        "dialog": str(dialog),
        "implicit_feedback": str(
            [
                {"round": 1, "implicit_action": "dislike", "terminated": False},
                {"round": 2, "implicit_action": "like", "terminated": True},
            ]
        ),
    }
    rows, notes = dialogue_rows("WritingBench-Politics&Law", row, "w/train: record 0", "e")
    assert [(r["round"], r["role"], r["implicit_action"], r["terminated"]) for r in rows] == [
        (0, "system", "", False),
        (0, "user", "", False),
        (0, "assistant", "", False),
        (0, "user", "", False),
        (0, "assistant", "", False),
        (1, "user", "dislike", False),
        (1, "assistant", "", False),
        (2, "user", "like", True),
    ]
    assert rows[-1]["content"] == "" and notes == []
    assert {r["dialogue_id"] for r in rows} == {"WritingBench-Politics&Law:4"}


def test_dialog_key_maps_mnemoflow_systems_to_memorybench_ones():
    assert {
        t: dialog_key(t)
        for t in (
            "bm25_message",
            "dense_message",
            "bm25_session",
            "dense_session",
            "agentic_external",
            "notes_linked",
            "tiered",
            "none",
            "rag",
        )
    } == {
        "bm25_message": "bm25",
        "dense_message": "embedder",
        "bm25_session": "bm25_dialog",
        "dense_session": "embedder_dialog",
        "agentic_external": "mem0",
        "notes_linked": "a_mem",
        "tiered": "memoryos",
        "none": "bm25",
        "rag": "bm25",
    }


def test_corpus_datasets_on_disk(release):
    p = _load(release, dataset="Locomo-0")
    to_arrow(p.sessions, SESSIONS)
    s, q = p.sessions, p.questions.set_index("question_id")
    assert s[["episode_id", "session_id", "turn_id", "role", "has_evidence"]].values.tolist() == [
        ["Locomo-0", "Locomo-0_s1", "D1:1", "user", False],
        ["Locomo-0", "Locomo-0_s1", "D1:2", "assistant", True],
    ]
    assert q.loc["Locomo-0:0", "episode_id"] == "Locomo-0"
    assert q.loc["Locomo-0:0", "answer"] == "2022"
    assert list(q.loc["Locomo-0:0", "evidence_ids"]) == ["D1:2"]
    meta = json.loads(q.loc["Locomo-0:0", "meta"])
    assert meta["extra"] == {"origin_question": "When did Melanie paint a sunrise?"}

    d = _load(release, dataset="DialSim-friends")
    assert d.sessions[["session_id", "session_time", "turn_id", "speaker"]].values.tolist() == [
        ["DialSim-friends_s1", "1994-09-22T00:00", "D1:1", "Monica"],
        ["DialSim-friends_s1", "1994-09-22T00:00", "D1:2", "Joey"],
        ["DialSim-friends_s2", "1994-09-29T00:00", "D2:1", "Ross"],
    ]
    dq = d.questions.set_index("question_id")
    assert dq.loc["DialSim-friends:0", "question"] == "Write a poem."
    assert d.dialogues.empty  # its only variant is an empty list


FIXTURES = Path(__file__).parent / "fixtures"


def test_dialsim_transcript_fixture():
    """Session blocks, a line without a colon (skipped, still counted), extra colons, spaces."""
    text = (FIXTURES / "dialsim_transcript.txt").read_text(encoding="utf-8")
    rows = dialsim_rows(text, "DialSim-bigbang")
    got = [
        (r["session_id"], r["session_index"], r["session_time"], r["turn_id"], r["turn_index"])
        + (r["speaker"], r["content"], r["role"])
        for r in rows
    ]
    assert got == [
        ("DialSim-bigbang_s3", 0, "2007-09-24T00:00", "D3:1", 0, "Sheldon", "Hello.", "user"),
        ("DialSim-bigbang_s3", 0, "2007-09-24T00:00", "D3:3", 1, "Leonard", "Time: 8:00.", "user"),
        ("DialSim-bigbang_s7", 1, "2007-10-01T00:00", "D7:1", 0, "Penny", "Hi guys!", "user"),
        ("DialSim-bigbang_s7", 1, "2007-10-01T00:00", "D7:2", 1, "All", "Hi, Penny.", "user"),
    ]


@needs_shared
def test_group_with_missing_datasets_names_every_file(release):
    with pytest.raises(DataError) as info:
        _load(release, task="Short-Short")
    assert str(info.value) == (
        f"memorybench: {release} has no dataset/LexEval-QA/dataset_dict.json, "
        "dataset/JRE-L/dataset_dict.json; place them there"
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


def _save_nfcats(root, train, test):
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list(train), "test": Dataset.from_list(test)}).save_to_disk(
        str(root / "dataset" / "NFCats")
    )
    return {"loader": "memorybench", "source": {"path": str(root)}, "set": "dataset:NFCats"}


def test_record_without_info_names_file_record_and_field(tmp_path):
    row = {"test_idx": 0, "input_prompt": "Q?", "dataset_name": "NFCats", "lang": "en"}
    good = {**row, "test_idx": 1, "info": "{}"}
    spec = _save_nfcats(tmp_path, [{**row, "info": None}], [good])
    with pytest.raises(DataError) as info:
        load_benchmark(spec)
    assert str(info.value) == "NFCats/train: record 0: missing field 'info'"


def test_dialogue_with_unknown_role_names_file_record_and_field(tmp_path):
    dialog = [{"role": "user", "content": "Q?"}, {"role": "critic", "content": "meh"}]
    row = {
        "test_idx": 0,
        "input_prompt": "Q?",
        "dataset_name": "NFCats",
        "lang": "en",
        "info": "{}",
        "dialog": str(dialog),
        "implicit_feedback": "[]",
    }
    spec = _save_nfcats(tmp_path, [row], [{**row, "test_idx": 1}])
    with pytest.raises(DataError) as info:
        load_benchmark(spec)
    assert str(info.value) == (
        "NFCats/train: record 0 'dialog'[1] 'role': 'critic' is not one of "
        "['user', 'assistant', 'system']"
    )


def test_unknown_dataset_in_a_set_names_file_entry_and_field(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    entry = {"dataset_name": "NFCats", "task_tag": "Short-Short", "domain_tag": "Open-Domain"}
    (configs / "each.json").write_text(json.dumps({"NFCats": entry}))
    (configs / "domain.json").write_text(json.dumps({"Open-Domain": [entry]}))
    bad = {**entry, "dataset_name": "NFCatz"}
    (configs / "task.json").write_text(json.dumps({"Short-Short": [entry, bad]}))
    with pytest.raises(DataError) as info:
        select("task:Short-Short", registry(configs))
    assert str(info.value) == (
        "task.json: Short-Short[1] 'dataset_name': 'NFCatz' is not a dataset of each.json"
    )
