"""``mnemoflow metric``: end to end on files, values per line in input order, errors for people."""

from __future__ import annotations

import json

import pytest

from mnemoflow.cli import main
from mnemoflow.eval.metric_registry import DETERMINISTIC_METRICS, DeterministicMetric, per_pair
from mnemoflow.registry import Entry
from tests.jsonl import write_jsonl

PAIRS = [
    {"prediction": "the cat was sitting on the mat", "reference": "the cat sat on the mat"},
    {"prediction": "x y z", "reference": "a b c"},
    {"prediction": "He is glad", "reference": "He is happy"},
]


def test_meteor_values_per_line_and_mean(tmp_path, capsys):
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    out = tmp_path / "values.jsonl"
    assert main(["metric", "meteor", "--pairs", str(pairs), "--out", str(out)]) == 0
    values = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    # worked in tests/test_eval_meteor.py: 250/305 * 0.968, 0, 0.625
    assert values == [pytest.approx(250 / 305 * 0.968), 0.0, pytest.approx(0.625)]
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == ["0.793443", "0.000000", "0.625000"]
    assert printed[3] == f"meteor: mean {(250 / 305 * 0.968 + 0.625) / 3:.6f} over 3 of 3 pairs"


def test_rouge_l_and_readability(tmp_path, capsys):
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS[:1])
    assert main(["metric", "rouge_l", "--pairs", str(pairs)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{10 / 13:.6f}"
    sunny = {"prediction": "The cat sat on the mat. It was a sunny day, and the cat was happy."}
    pairs = write_jsonl(tmp_path / "sunny.jsonl", [{**sunny, "reference": ""}])
    assert main(["metric", "dcrs", "--pairs", str(pairs)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "0.396800"


def test_bertscore_in_one_batch(tmp_path):
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"prediction": "The cat sat on the mat.", "reference": "The cat sat on the mat."},
            {"prediction": "Stocks fell on Monday.", "reference": "The cat sat on the mat."},
        ],
    )
    out = tmp_path / "values.jsonl"
    assert main(["metric", "bertscore", "--pairs", str(pairs), "--out", str(out)]) == 0
    same, other = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    assert same == pytest.approx(1.0, abs=1e-4) and other < 0.5


def test_list_names_every_metric(capsys):
    assert main(["metric", "--list"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == sorted(DETERMINISTIC_METRICS)
    assert {"meteor", "bertscore", "rouge_l", "cli", "fkgl", "dcrs"} <= set(names)
    assert {"locomo_f1", "dialsim_exact", "rouge_l_zh"} <= set(names)


def test_locomo_f1_by_category_with_the_category_5_option_object(tmp_path, capsys):
    options = json.dumps({"a": "Not mentioned in the conversation", "b": "Read a book."})
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            # cat 4: gold tokens brave, by, sara, bareil; "Brave": P 1, R 1/4 -> F1 0.4
            {"prediction": "Brave", "reference": "Brave by Sara Bareilles", "category": 4},
            # cat 1: mean over gold parts of the best part F1: paris 0, rome 1 -> 0.5
            {"prediction": "Rome", "reference": "Paris, Rome", "category": 1},
            # cat 5: "(a)" stands for option a's text, "not mentioned" -> 1; "(b)" -> 0
            {"prediction": "(a)", "reference": options, "category": 5},
            {"prediction": "(b)", "reference": options, "category": 5},
        ],
    )
    out = tmp_path / "values.jsonl"
    assert main(["metric", "locomo_f1", "--pairs", str(pairs), "--out", str(out)]) == 0
    values = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    assert values == [pytest.approx(0.4), pytest.approx(0.5), 1.0, 0.0]
    assert "locomo_f1: mean 0.475000 over 4 of 4 pairs" in capsys.readouterr().out
    missing = write_jsonl(tmp_path / "m.jsonl", [{"prediction": "x", "reference": "y"}])
    assert main(["metric", "locomo_f1", "--pairs", str(missing)]) == 2
    assert "missing field 'category'" in capsys.readouterr().err


def test_dialsim_exact_defers_to_the_judge_with_null(tmp_path, capsys):
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"prediction": " monica. ", "reference": "Monica"},  # gold + "." is tolerated
            {"prediction": "Monica", "reference": "Monica."},  # one-sided: the judge decides
            {"prediction": "Ross", "reference": "Monica"},
        ],
    )
    out = tmp_path / "values.jsonl"
    assert main(["metric", "dialsim_exact", "--pairs", str(pairs), "--out", str(out)]) == 0
    assert out.read_text().splitlines() == ['{"value": 1.0}', '{"value": null}', '{"value": null}']


def test_rouge_l_zh(tmp_path, capsys):
    # jieba: 合同 / 无效 vs 合同 / 有效: one of two distinct tokens in common each way -> F 0.5
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"prediction": "合同无效。", "reference": "合同无效"},
            {"prediction": "合同有效", "reference": "合同无效"},
            {"prediction": "", "reference": "合同无效"},
        ],
    )
    out = tmp_path / "values.jsonl"
    assert main(["metric", "rouge_l_zh", "--pairs", str(pairs), "--out", str(out)]) == 0
    values = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    assert values == [pytest.approx(0.999999995, abs=1e-12), pytest.approx(0.5 - 5e-9), 0.0]


def test_a_metric_that_defers_writes_null(tmp_path, monkeypatch, capsys):
    exact = DeterministicMetric(
        "exact_or_judge", "test", per_pair(lambda ref, pred: 1.0 if ref == pred else None)
    )
    monkeypatch.setitem(DETERMINISTIC_METRICS.entries, exact.name, Entry(exact, {}))
    pairs = write_jsonl(
        tmp_path / "pairs.jsonl",
        [{"prediction": "a", "reference": "a"}, {"prediction": "b", "reference": "c"}],
    )
    out = tmp_path / "values.jsonl"
    assert main(["metric", "exact_or_judge", "--pairs", str(pairs), "--out", str(out)]) == 0
    assert out.read_text().splitlines() == ['{"value": 1.0}', '{"value": null}']
    assert "mean 1.000000 over 1 of 2 pairs" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"reference": "a"}', "pairs.jsonl: record 2: missing field 'prediction'"),
        ('{"prediction": 3, "reference": "a"}', "'prediction' must be a string"),
        ("not json", "pairs.jsonl: record 2: not JSON"),
    ],
)
def test_bad_lines_are_one_line_errors(tmp_path, capsys, line, message):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps(PAIRS[0]) + "\n" + line + "\n")
    assert main(["metric", "rouge_l", "--pairs", str(pairs)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_metric(tmp_path, capsys):
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    assert main(["metric", "bleu", "--pairs", str(pairs)]) == 2
    assert "unknown metric 'bleu'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("metric", "line", "message"),
    [
        # an object reference is only a Locomo category-5 gold; meteor crashed with a traceback
        ("rouge_l", '{"prediction": "a", "reference": {"a": "x"}}', "'reference' must be a string"),
        (
            "locomo_f1",
            '{"prediction": "a", "reference": "b", "category": "five"}',
            "pairs.jsonl: record 2: 'category' must be an integer",
        ),
        (
            "locomo_f1",
            '{"prediction": "a", "reference": "b", "category": 9}',
            "pairs.jsonl: record 2: 'category' must be 1-5, got 9",
        ),
        (
            "locomo_f1",
            '{"prediction": "a", "reference": "Not mentioned", "category": 5}',
            "pairs.jsonl: record 2: 'reference' of a category-5 item must be the options object",
        ),
    ],
)
def test_bad_metric_fields_are_one_line_errors(tmp_path, capsys, metric, line, message):
    first = {**PAIRS[0], "category": 1}
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps(first) + "\n" + line + "\n")
    assert main(["metric", metric, "--pairs", str(pairs)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
