"""``mnemoflow score --benchmark memorybench`` and ``mnemoflow normalize``, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.cli import main
from tests.jsonl import write_jsonl
from tests.shared_data import SHARED_DATA as SHARED  # noqa: E402

MB = SHARED / "memorybench" if SHARED else None
pytestmark = pytest.mark.skipif(MB is None or not MB.exists(), reason="no ../shared data")
CONFIGS = MB / "configs" / "datasets" if MB else None
STATS = MB / "configs" / "final_evaluate_summary_wo_details.json" if MB else None
LEXEVAL = MB / "raw" / "LexEval-QA_5_4.jsonl" if MB else None


def lexeval_answer(test_idx: int) -> str:
    with LEXEVAL.open(encoding="utf-8") as handle:
        return json.loads(handle.readlines()[test_idx])["answer"]


def score(data: Path, set_name: str, predictions: Path, out: Path, *options: str) -> int:
    """``mnemoflow score --benchmark memorybench`` of ``predictions`` on ``set_name`` of ``data``,
    with the real registry configs; the exit code."""
    argv = ["score", "--benchmark", "memorybench", "--data", data, "--configs", CONFIGS]
    argv += ["--set", set_name, "--predictions", predictions, "--out", out, *options]
    return main([str(arg) for arg in argv])


def normalize(set_name: str, values: Path, out: Path) -> int:
    """``mnemoflow normalize`` of per-item ``values`` over ``set_name`` (the real registry and
    statistics); the exit code."""
    argv = ["normalize", "--set", set_name, "--configs", CONFIGS, "--stats", STATS]
    return main([str(arg) for arg in [*argv, "--scores", values, "--out", out]])


def test_score_a_raw_dataset(tmp_path, capsys):
    # test items 128 and 56 of LexEval-QA (see test_data_memorybench): the gold itself, and ""
    predictions = write_jsonl(
        tmp_path / "predict.jsonl",
        [
            {"dataset": "LexEval-QA", "test_idx": 128, "response": lexeval_answer(128)},
            {"test_idx": 56, "response": ""},  # dataset may be left out for a dataset: set
        ],
    )
    out = tmp_path / "out"
    code = score(LEXEVAL, "dataset:LexEval-QA", predictions, out)
    assert code == 0
    items = pd.read_parquet(out / "question_scores.parquet")
    assert list(items.columns[:5]) == ["dataset", "test_idx", "metric", "value", "question_id"]
    assert items[["question_id", "metric", "parse_ok"]].values.tolist() == [
        ["LexEval-QA:128", "rougel", True],
        ["LexEval-QA:56", "rougel", True],
    ]
    assert items["value"].tolist() == pytest.approx([0.999999995, 0.0])
    scores = pd.read_parquet(out / "scores.parquet")
    assert scores[["dataset", "metric", "n"]].values.tolist() == [["LexEval-QA", "rougel", 2]]
    assert scores["value"].item() == pytest.approx(0.4999999975)
    judge = json.loads((out / "judge.json").read_text())
    assert (judge["judge"]["backend"], judge["judge"]["model"]) == ("offline", "offline-heuristic")
    printed = capsys.readouterr().out
    assert "LexEval-QA                   rougel    0.5000  (n=2)" in printed


def write_short_short_release(root: Path) -> None:
    """The three datasets of task Short-Short in the Hub layout, two items each."""
    from datasets import Dataset, DatasetDict

    for name, lang, info in (
        ("LexEval-QA", "zh", {"golden_answer": "合同无效"}),
        ("NFCats", "en", {}),
        ("JRE-L", "en", {"pr-title": "t"}),
    ):
        rows = [
            {
                "test_idx": i,
                "input_prompt": "Please answer ...\n\nQuestion: why is the sky blue"
                if name == "NFCats"
                else f"{name} item {i}",
                "dataset_name": name,
                "lang": lang,
                "info": str(info),
            }
            for i in range(2)
        ]
        DatasetDict(
            {"train": Dataset.from_list(rows[:1]), "test": Dataset.from_list(rows[1:])}
        ).save_to_disk(str(root / "dataset" / name))


def test_score_a_task_set_prints_the_normalized_summary(tmp_path, capsys):
    release = tmp_path / "release"
    write_short_short_release(release)
    predictions = write_jsonl(
        tmp_path / "predict.jsonl",
        [
            {"dataset": "LexEval-QA", "test_idx": 1, "response": ""},  # rougel 0
            {"dataset": "NFCats", "test_idx": 1, "response": ""},  # offline judge: 1
        ],
    )
    out = tmp_path / "out"
    code = score(release, "task:Short-Short", predictions, out)
    assert code == 0
    items = pd.read_parquet(out / "question_scores.parquet")
    assert items[["question_id", "metric", "value", "raw_reply"]].values.tolist() == [
        ["LexEval-QA:1", "rougel", 0.0, ""],
        ["NFCats:1", "score", 1.0, "1"],
    ]
    scores = pd.read_parquet(out / "scores.parquet")
    summary = scores[scores["dataset"] == "all"].set_index("metric")["value"].to_dict()
    # both values are their dataset's minimum (min-max 0); z with task Short-Short statistics
    z = (0.0 - 0.12312124506737952) / 0.0673206327681146 + (1 - 4.4325) / 0.9749070468511344
    assert summary == pytest.approx({"average": 0.0, "weighted_average": 0.0, "z_score": z / 2})
    printed = capsys.readouterr().out
    assert f"task:Short-Short  z_score           {z / 2:.4f}  (n=2)" in printed
    assert "missing: JRE-L" in printed


def test_normalize_command(tmp_path, capsys):
    values = write_jsonl(
        tmp_path / "values.jsonl",
        [
            {"dataset": "LexEval-QA", "test_idx": 1, "value": 0.3616236123342547},
            {"dataset": "NFCats", "test_idx": 1, "value": 3},
            {"dataset": "JRE-L", "test_idx": 4, "value": 5},
        ],
    )
    out = tmp_path / "out"
    code = normalize("task:Short-Short", values, out)
    assert code == 0
    scores = pd.read_parquet(out / "scores.parquet")
    summary = scores[scores["dataset"] == "all"].set_index("metric")["value"].to_dict()
    # min-max: 1, (3 - 1) / 4 = 0.5, (5 - 2) / 6 = 0.5
    assert summary["average"] == pytest.approx(2 / 3)
    assert summary["weighted_average"] == pytest.approx(2 / 3)
    assert list(scores["metric"][:3]) == ["average", "weighted_average", "z_score"]
    assert "task:Short-Short  average           0.6667  (n=3)" in capsys.readouterr().out


def test_a_predictions_line_without_test_idx(tmp_path, capsys):
    predictions = write_jsonl(
        tmp_path / "predict.jsonl",
        [{"dataset": "LexEval-QA", "test_idx": 128, "response": "x"},
         {"dataset": "LexEval-QA", "response": "y"}],
    )  # fmt: skip
    out = tmp_path / "out"
    code = score(LEXEVAL, "dataset:LexEval-QA", predictions, out)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"mnemoflow score: error: {predictions}: line 2 (LexEval-QA): missing field 'test_idx'"
    )
    assert not (out / "question_scores.parquet").exists() and not (out / "scores.parquet").exists()


def test_a_prediction_outside_the_set_or_the_data(tmp_path, capsys):
    other = write_jsonl(
        tmp_path / "a.jsonl", [{"dataset": "NFCats", "test_idx": 1, "response": "x"}]
    )
    assert score(LEXEVAL, "dataset:LexEval-QA", other, tmp_path / "o") == 2
    assert capsys.readouterr().err.strip() == (
        f"mnemoflow score: error: {other}: line 1: field 'dataset': 'NFCats' is not in the set"
    )
    # item 2 of the file is not among the 250 sampled items (0, 1, 3, 5, 9 are)
    unsampled = write_jsonl(tmp_path / "b.jsonl", [{"test_idx": 2, "response": "x"}])
    assert score(LEXEVAL, "dataset:LexEval-QA", unsampled, tmp_path / "o") == 2
    assert capsys.readouterr().err.strip().endswith("(LexEval-QA, 2) is not an item of the data")


def test_normalize_rejects_a_dataset_outside_the_set(tmp_path, capsys):
    values = write_jsonl(tmp_path / "v.jsonl", [{"dataset": "Locomo-0", "test_idx": 1, "value": 1}])
    code = normalize("task:Short-Short", values, tmp_path / "o")
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"mnemoflow normalize: error: {values}: line 1: field 'dataset': 'Locomo-0' is not "
        "in the set"
    )


def test_a_record_without_the_field_its_metric_reads_fails_with_one_line(tmp_path, capsys):
    release = tmp_path / "release"
    write_short_short_release(release)  # its JRE-L items have no info.pr-abstract
    capsys.readouterr()  # the datasets library's progress bars
    predictions = write_jsonl(
        tmp_path / "predict.jsonl",
        [
            {"dataset": "NFCats", "test_idx": 1, "response": "blue light scatters"},
            {"dataset": "JRE-L", "test_idx": 1, "response": "A title"},
        ],
    )
    out = tmp_path / "out"
    code = score(release, "task:Short-Short", predictions, out)
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "mnemoflow score: error: questions: record JRE-L:1: missing field 'info.pr-abstract'"
    )
    assert not (out / "question_scores.parquet").exists()


def test_a_bertscore_model_for_an_unknown_family(tmp_path, capsys):
    options = ("--bertscore-model", "LexEval=/models/bert")
    code = score(LEXEVAL, "dataset:LexEval-QA", tmp_path / "p.jsonl", tmp_path / "o", *options)
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "mnemoflow score: error: --bertscore-model 'LexEval=/models/bert': expected "
        "FAMILY=FOLDER with FAMILY one of ['IdeaBench', 'JRE-L', 'JuDGE']"
    )
