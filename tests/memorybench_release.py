"""A tiny MemoryBench release in the Hub layout, every one of the 28 datasets, for set tests.

Each dataset has one training item (test_idx 0) and two test items (1, 2) in the record format
the reference's loaders produce (``info`` stored as Python-literal text, as the release does;
JuDGE and LimitGen-Syn as ``input_chat_messages``); Locomo-k and DialSim-* come with their
``corpus/<name>.jsonl``. :func:`good_response` and :func:`poor_response` give, per item, a
response whose scores are worked out in the tests (the gold itself, or nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NM = "Not mentioned in the conversation"
LOCOMO_RECORD = {
    "sample_id": "conv-26",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "I painted a sunrise in Paris."},
        ],
    },
}
DIALSIM_TEXT = (
    "[Date: September 22, 1994, Session #1]\n\nMonica: There's nothing to tell!\n"
    "Joey: C'mon, you're going out with the guy!\n"
)
#: A judgment document with every section the JuDGE segmenter cuts, a crime, a statute, a
#: prison term and a fine.
JUDGMENT = (
    "浙江省某县人民法院刑事判决书。公诉机关某县人民检察院。本院依法公开开庭审理了本案，现已审理终结。"
    "经审理查明，被告人张某于2020年盗窃他人财物。"
    "本院认为，被告人张某以非法占有为目的，秘密窃取他人财物，其行为已构成盗窃罪。"
    "依照《中华人民共和国刑法》第二百六十四条之规定，判决如下："
    "被告人张某犯盗窃罪，判处有期徒刑一年，并处罚金人民币五千元。"
    "如不服本判决，可在接到判决书的第二日起十日内提出上诉。"
)
CHECKLIST = [
    {"checklist_id": 0, "checklist_content": "Does the story feature a dragon?"},
    {"checklist_id": 1, "checklist_content": "Is the story set in winter?"},
]
CRITERIA = [
    {
        "name": "Legal accuracy",
        "criteria_description": "The memo cites the statute correctly.",
        "1-2": "wrong",
        "9-10": "exact",
    }
]
LIMITATION = "The paper compares with too few baselines."
QUERY = "Write a memo on the theft statute for a client."


def _info(family: str, test_idx: int) -> dict[str, Any]:
    if family == "Locomo":
        if test_idx == 2:
            return {"golden_answer": {"a": NM, "b": "A sunrise."}, "category": 5, "evidence": []}
        return {"golden_answer": "Paris", "category": 4, "evidence": [{"dia_id": "D1:2"}]}
    if family == "DialSim":
        return {"golden_answer": "Monica"}
    if family == "LexEval":
        return {"golden_answer": "合同无效"}
    if family == "NFCats":
        return {"category": "REASON"}
    if family == "WritingPrompts":
        return {"golden_answer": "the cat sat on the mat"}
    if family == "HelloBench":
        return {"checklist": CHECKLIST}
    if family == "WritingBench":
        return {"criteria": CRITERIA}
    if family == "JuDGE":
        return {"golden_answer": JUDGMENT}
    if family == "IdeaBench":
        return {"paperId": "p1", "title": "t", "abstract": "Sparse attention speeds up long video."}
    if family == "JRE-L":
        return {
            "sc-title": "t",
            "sc-abstract": "a",
            "pr-title": "t",
            "pr-abstract": "The cat sat on the mat. It was a sunny day.",
        }
    if family == "LimitGen":
        return {"category": "baseline", "ground_truth": LIMITATION}
    raise AssertionError(family)


def family(dataset: str) -> str:
    for prefix in (
        "Locomo", "DialSim", "LexEval", "NFCats", "WritingPrompts", "HelloBench", "WritingBench",
        "JuDGE", "IdeaBench", "JRE-L", "LimitGen",
    ):  # fmt: skip
        if dataset.startswith(prefix):
            return prefix
    raise AssertionError(dataset)


def _record(dataset: str, test_idx: int) -> dict[str, Any]:
    fam = family(dataset)
    lang = "zh" if fam in ("LexEval", "JuDGE") else "en"
    record: dict[str, Any] = {
        "test_idx": test_idx,
        "dataset_name": dataset,
        "lang": lang,
        "info": str(_info(fam, test_idx)),  # the release stores info as Python-literal text
    }
    if fam in ("JuDGE", "LimitGen"):
        user = "案件事实：张某盗窃。" if fam == "JuDGE" else "Paper. List limitations."
        record["input_chat_messages"] = str(
            [{"role": "system", "content": "You help."}, {"role": "user", "content": user}]
        )
    elif fam == "NFCats":
        record["input_prompt"] = "Please answer ...\n\nQuestion: why is the sky blue"
    elif fam == "WritingBench":
        record["input_prompt"] = QUERY
    else:
        record["input_prompt"] = f"{dataset} item {test_idx}"
    return record


def good_response(dataset: str, test_idx: int) -> str:
    """A response that scores at the top of the offline scale (worked out in the tests)."""
    fam = family(dataset)
    info = _info(fam, test_idx)
    if fam == "Locomo":
        return "(a)" if test_idx == 2 else "Paris"
    if fam in ("DialSim", "LexEval", "WritingPrompts", "JuDGE"):
        return str(info["golden_answer"])
    if fam == "NFCats":
        return "The sky is blue because air scatters blue light more than red light."
    if fam == "HelloBench":
        return "A dragon flew over the winter story's snowy town."
    if fam == "WritingBench":
        return f"{QUERY} {json.dumps(CRITERIA, ensure_ascii=False)}"
    if fam == "IdeaBench":
        return info["abstract"]
    if fam == "JRE-L":
        return info["pr-abstract"]
    if fam == "LimitGen":
        return json.dumps({"limitations": [LIMITATION]})
    raise AssertionError(fam)


def all_datasets(configs: Path) -> list[str]:
    return list(json.loads((configs / "each.json").read_text(encoding="utf-8")))


def write_release(root: Path, configs: Path) -> list[str]:
    """Every dataset of ``configs/each.json``; returns their names."""
    from datasets import Dataset, DatasetDict

    names = all_datasets(configs)
    for name in names:
        rows = [_record(name, i) for i in range(3)]
        DatasetDict(
            {"train": Dataset.from_list(rows[:1]), "test": Dataset.from_list(rows[1:])}
        ).save_to_disk(str(root / "dataset" / name))
        fam = family(name)
        if fam in ("Locomo", "DialSim"):
            text = json.dumps(LOCOMO_RECORD) if fam == "Locomo" else DIALSIM_TEXT
            corpus = root / "corpus" / f"{name}.jsonl"
            corpus.parent.mkdir(parents=True, exist_ok=True)
            corpus.write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    return names


def predictions(datasets: list[str]) -> list[dict[str, Any]]:
    """Test item 1 answered well, test item 2 answered with nothing, for every dataset."""
    out = []
    for name in datasets:
        out.append({"dataset": name, "test_idx": 1, "response": good_response(name, 1)})
        out.append({"dataset": name, "test_idx": 2, "response": ""})
    return out


def locomo_release(tmp_path: Path, configs: Path) -> dict[str, Any]:
    """The release of Locomo-0 alone under ``tmp_path`` (the benchmark reads the real
    ``configs``), as a benchmark entry scored by the judge protocol: off-policy, its training
    dialogues generated with the rule-based user (correct iff the judge's score > 0.5)."""
    only = tmp_path / "only"
    only.mkdir()
    each = json.loads((configs / "each.json").read_text(encoding="utf-8"))
    (only / "each.json").write_text(json.dumps({"Locomo-0": each["Locomo-0"]}))
    release = tmp_path / "release"
    write_release(release, only)
    return {
        "loader": "memorybench",
        "source": {"path": str(release)},
        "set": "dataset:Locomo-0",
        "configs": str(configs),
        "scoring": "judge",
        "protocols": ["off_policy"],
        "feedback": {"dialogues": "generated", "max_rounds": 2},
    }
