"""``mnemoflow import`` and the ``imported`` system: a published per-question output read as a
run's answers (every format's question mapping, the sha256 check, one-line errors), and, through
the workflow, an exported run imported back and re-judged to the run's own numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow import cli
from mnemoflow.data.registry import load_benchmark
from mnemoflow.errors import ConfigError
from mnemoflow.eval.imported import check_imported, file_sha256, imported_answers, read_imported
from mnemoflow.memory.base import build
from tests.eval_fixtures import longmemeval_tables
from tests.paper_standins import locomo_samples
from tests.shared_data import REPO, shared_file

KEYS = {"benchmark": "conv", "system": "published", "protocol": "qa", "step": 0}
WHERE = "config systems.published"


def two_samples(path: Path) -> pd.DataFrame:
    """A two-sample locomo10.json at ``path`` (the stand-in and a copy, conv-27, whose first
    question is asked twice) and its prepared questions."""
    first = locomo_samples()[0]
    second = json.loads(json.dumps(first))
    second["sample_id"] = "conv-27"
    second["qa"].insert(1, dict(second["qa"][0], answer="London"))
    path.write_text(json.dumps([first, second]), encoding="utf-8")
    return load_benchmark({"loader": "locomo", "source": {"path": str(path)}}).questions


def spec(path: Path, fmt: str, **extra) -> dict:
    return {"type": "imported", "format": fmt, "path": str(path), "sha256": file_sha256(path),
            **extra}  # fmt: skip


def test_locomo_samples_give_each_question_its_prediction_and_context(tmp_path):
    questions = two_samples(tmp_path / "locomo10.json")
    samples = json.loads((tmp_path / "locomo10.json").read_text())
    for j, qa in enumerate(samples[0]["qa"]):
        qa["mem0_prediction"] = f"answer {j}"
        qa["mem0_prediction_context"] = ["D1:2"] if j == 0 else []
    out = tmp_path / "published.json"
    out.write_text(json.dumps(samples))
    answers, failures = imported_answers(questions, questions, spec(out, "locomo"), KEYS, WHERE)
    got = answers.set_index("question_id")
    assert got.loc["conv-26_q0", "response"] == "answer 0"
    assert list(got.loc["conv-26_q0", "ranked_ids"]) == ["D1:2"]
    assert list(got.loc["conv-26_q1", "ranked_ids"]) == []  # an empty context: recall 0
    assert set(got["system"]) == {"published"} and set(got["model"]) == {"imported:locomo"}
    # the second sample has no prediction: kept with an empty answer, reported as not answered
    assert sorted(failures) == [f"conv-27_q{j}" for j in range(4)]
    assert got.loc["conv-27_q0", "response"] == ""


def test_mem0_results_map_by_conversation_and_question_text(tmp_path):
    questions = two_samples(tmp_path / "locomo10.json")
    samples = json.loads((tmp_path / "locomo10.json").read_text())
    # the Mem0 evaluation's shape: conversation index -> records, category 5 left out
    results = {
        str(k): [
            {"question": qa["question"], "answer": qa.get("answer", ""),
             "response": f"{sample['sample_id']} says {j}", "category": qa["category"]}
            for j, qa in enumerate(sample["qa"]) if qa["category"] != 5
        ]
        for k, sample in enumerate(samples)
    }  # fmt: skip
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    answers, failures = imported_answers(questions, questions, spec(path, "locomo"), KEYS, WHERE)
    got = dict(zip(answers["question_id"], answers["response"], strict=True))
    # conv-27 asks its first question twice: the records take them in QA order
    assert got["conv-27_q0"] == "conv-27 says 0" and got["conv-27_q1"] == "conv-27 says 1"
    assert got["conv-26_q1"] == "conv-26 says 1"
    assert sorted(failures) == ["conv-26_q2", "conv-27_q3"]  # the adversarial ones

    results["1"][2]["question"] = "Where is Caroline's sunrise?"
    path.write_text(json.dumps(results))
    with pytest.raises(ConfigError) as error:
        imported_answers(questions, questions, spec(path, "locomo"), KEYS, WHERE)
    message = str(error.value)
    assert message.startswith(f"{path}: conversation 1 record 2: field 'question'")
    assert "matches no unanswered question of sample conv-27" in message
    assert "\n" not in message
    results["1"][2]["question"] = results["1"][0]["question"]  # a third ask of a twice-asked one
    path.write_text(json.dumps(results))
    with pytest.raises(ConfigError, match="conversation 1 record 2: field 'question'"):
        imported_answers(questions, questions, spec(path, "locomo"), KEYS, WHERE)
    path.write_text(json.dumps({"2": []}))
    with pytest.raises(ConfigError, match=r"conversation 2: not a conversation index .*\(0\.\.1\)"):
        imported_answers(questions, questions, spec(path, "locomo"), KEYS, WHERE)


def test_longmemeval_hypotheses_eval_log_and_retrievals(tmp_path):
    _, _, questions = longmemeval_tables()
    ids = list(questions["question_id"])
    # the official eval log: the hypotheses file plus the judge's label per line
    log = tmp_path / "hypotheses.jsonl.eval-results-gpt-4o"
    log.write_text(
        "".join(
            json.dumps({"question_id": q, "hypothesis": f"h{i}",
                        "autoeval_label": {"model": "gpt-4o", "label": i % 2 == 0}}) + "\n"
            for i, q in enumerate(ids[:3])
        )
    )  # fmt: skip
    ranked = tmp_path / "retrievals.jsonl"
    ranked.write_text(
        json.dumps(
            {"question_id": ids[0], "retrieval_results": {"ranked_items": [{"corpus_id": "s_a_1"}]}}
        )
        + "\n"
    )
    retrievals = {"path": str(ranked), "sha256": file_sha256(ranked)}
    system = spec(log, "longmemeval", retrievals=retrievals)
    todo = questions[questions["question_id"].isin(ids[:2] + ids[3:])]
    answers, failures = imported_answers(questions, todo, system, KEYS, WHERE)
    assert list(answers["question_id"]) == sorted(todo["question_id"])
    got = answers.set_index("question_id")
    assert got.loc[ids[1], "response"] == "h1"
    assert list(got.loc[ids[0], "ranked_ids"]) == ["s_a_1"]
    assert failures == {ids[3]: f"not answered in {log}"}

    log.write_text(log.read_text() + json.dumps({"question_id": "nope", "hypothesis": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"line 4: question_id 'nope' is not in the benchmark"):
        imported_answers(questions, todo, spec(log, "longmemeval"), KEYS, WHERE)


def test_memorybench_predictions_map_by_dataset_and_test_idx(tmp_path):
    questions = pd.DataFrame(
        {
            "question_id": ["LexEval-QA:1", "LexEval-QA:2", "NFCats:1"],
            "dataset": ["LexEval-QA", "LexEval-QA", "NFCats"],
            "episode_id": ["e1", "e2", "e3"],
            "question_type": ["qa", "qa", "qa"],
        }
    )
    path = tmp_path / "predict.jsonl"
    lines = [{"dataset": "LexEval-QA", "test_idx": 2, "response": "two"},
             {"dataset": "NFCats", "test_idx": 1, "response": "nf"}]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    answers, failures = imported_answers(
        questions, questions, spec(path, "memorybench"), KEYS, WHERE
    )
    assert dict(zip(answers["question_id"], answers["response"], strict=True)) == {
        "LexEval-QA:1": "",
        "LexEval-QA:2": "two",
        "NFCats:1": "nf",
    }
    assert list(failures) == ["LexEval-QA:1"]


def test_a_changed_file_or_a_bad_entry_is_one_line(tmp_path):
    questions = two_samples(tmp_path / "locomo10.json")
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"0": []}))
    system = spec(path, "locomo")
    path.write_text(json.dumps({"1": []}))  # edited after the import
    with pytest.raises(ConfigError) as error:
        imported_answers(questions, questions, system, KEYS, WHERE)
    assert str(error.value) == (
        f"{WHERE}.sha256: {path} has sha256 {file_sha256(path)}, the config says {system['sha256']}"
    )
    with pytest.raises(ConfigError, match=rf"^{WHERE}.path: no such file"):
        imported_answers(questions, questions, {**system, "path": "gone.json"}, KEYS, WHERE)
    with pytest.raises(ConfigError, match=r"\.format: static QA reads .* interactive protocol\)$"):
        imported_answers(questions, questions, {**system, "format": "amemgym"}, KEYS, WHERE)
    with pytest.raises(ConfigError, match=r"^systems.published.sha256: 'abc' does not match"):
        build({**system, "sha256": "abc"}, name="published")
    with pytest.raises(ConfigError, match=r"systems.published: unknown parameters \['file'\]"):
        build({**system, "file": "x"}, name="published")


def test_import_writes_a_config_layer(tmp_path, capsys):
    _, _, questions = longmemeval_tables()
    path = tmp_path / "hypotheses.jsonl"
    path.write_text(json.dumps({"question_id": "q_cat", "hypothesis": "Miso"}) + "\n")
    layer = tmp_path / "import.yaml"
    argv = ["import", "--format", "longmemeval", str(path), "--name", "published"]
    argv += ["--benchmark", "longmemeval_s", "--with", "bm25_message", "--out", str(layer)]
    assert cli.main(argv) == 0
    assert "published: 1 answers of" in capsys.readouterr().out
    config = yaml.safe_load(layer.read_text())
    assert config == {
        "systems": {
            "published": {
                "type": "imported",
                "format": "longmemeval",
                "path": str(path),
                "sha256": file_sha256(path),
            }
        },
        "benchmarks": {"longmemeval_s": {"systems": ["bm25_message", "published"]}},
    }
    build(config["systems"]["published"])  # a valid systems: entry

    path.write_text('{"question_id": "q_cat"}\n')
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().endswith(f"{path}: line 1: missing field 'hypothesis'")
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"0": [{"question": "Q?", "response": 3}]}))
    argv[2:4] = ["locomo", str(results)]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert "conversation 0 record 0: missing or non-text field 'response'" in error
    argv[2] = "amemgym"
    assert cli.main(argv) == 2
    assert "results.json: user 0: missing field 'overall_results'" in capsys.readouterr().err


#: The shipped published output (data/imported/README.md) and its authors' published numbers.
SHIPPED = REPO / "data/imported/powermemo_locomo/powermemo_eval_0503_3000.json"
SHIPPED_SHA256 = "3e5623255997b7d42297f1e1d687295e6e8ecc745338fed5e09697bad5400ee5"
#: LLM-judge score per Mem0-evaluation category and overall (the Powermemo README's row)
PUBLISHED = {1: 0.6383, 2: 0.8037, 3: 0.5208, 4: 0.7182, "overall": 0.7091}


def test_the_shipped_published_output_reads_back_to_its_published_aggregate(tmp_path, capsys):
    assert file_sha256(SHIPPED) == SHIPPED_SHA256  # pinned: a byte-for-byte copy
    source = shared_file("locomo", "locomo10.json")
    questions = load_benchmark({"loader": "locomo", "source": {"path": str(source)}}).questions
    system = {"type": "imported", "format": "locomo", "path": str(SHIPPED),
              "sha256": SHIPPED_SHA256}  # fmt: skip
    imported = read_imported(system, questions, WHERE)
    # every record finds its question by conversation index and text; category 5 is not asked
    assert len(imported.responses) == 1540
    categories = {
        q: json.loads(m)["category"]
        for q, m in zip(questions["question_id"], questions["meta"], strict=True)
    }
    assert sorted({categories[q] for q in imported.responses}) == [1, 2, 3, 4]
    assert sum(c != 5 for c in categories.values()) == 1540
    verdicts = pd.Series(imported.verdicts)
    by_category = verdicts.groupby(verdicts.index.map(categories)).mean()
    for category in (1, 2, 3, 4):
        assert round(by_category[category], 4) == PUBLISHED[category], category
    assert round(verdicts.mean(), 4) == PUBLISHED["overall"]
    # the import command says the published number beside the layer it writes
    argv = ["import", "--format", "locomo", str(SHIPPED), "--name", "powermemo"]
    assert cli.main([*argv, "--benchmark", "locomo", "--out", str(tmp_path / "i.yaml")]) == 0
    assert "the file's own judge: 0.7091 over 1540 answers" in capsys.readouterr().out


def test_a_longmemeval_eval_log_keeps_the_official_judges_labels(tmp_path):
    _, _, questions = longmemeval_tables()
    ids = list(questions["question_id"])
    log = tmp_path / "hypotheses.jsonl.eval-results-gpt-4o"
    lines = [
        {
            "question_id": ids[0],
            "hypothesis": "a",
            "autoeval_label": {"model": "gpt-4o", "label": True},
        },
        {
            "question_id": ids[1],
            "hypothesis": "b",
            "autoeval_label": {"model": "gpt-4o", "label": False},
        },
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))  # fmt: skip
    imported = read_imported(spec(log, "longmemeval"), questions, WHERE)
    assert imported.verdicts == {ids[0]: 1.0, ids[1]: 0.0}
    lines[1]["autoeval_label"]["label"] = "no"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ConfigError, match=r"line 2: 'autoeval_label.label' must be true/false"):
        read_imported(spec(log, "longmemeval"), questions, WHERE)


def test_an_imported_system_is_refused_at_start_outside_static_qa(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"question_id": "q", "hypothesis": "a"}\n')
    systems = {"none": {"type": "none"}, "pub": spec(path, "longmemeval")}
    check_imported(systems, ["none", "pub"], ["qa"], "config benchmarks.b")  # fine
    with pytest.raises(ConfigError) as error:
        check_imported(systems, ["pub"], ["interactive"], "config benchmarks.amem")
    assert str(error.value) == (
        "config benchmarks.amem: system 'pub' is imported (its answers are read from a file) "
        "and its longmemeval output answers static QA only, not ['interactive']"
    )
    path.write_text("")  # changed since the import
    with pytest.raises(ConfigError, match=r"^config systems.pub.sha256: "):
        check_imported(systems, ["pub"], ["qa"], "config benchmarks.b")
    systems["pub"]["format"] = "amemgym"
    with pytest.raises(ConfigError, match=r"its amemgym output answers the interactive protocol"):
        check_imported(systems, ["pub"], ["qa"], "config benchmarks.b")
    systems["pub"]["format"] = "xml"
    with pytest.raises(ConfigError, match=r"^config systems.pub.format: one of"):
        check_imported(systems, ["pub"], ["qa"], "config benchmarks.b")


def test_import_of_a_broken_mem0_file_names_the_file_record_and_field(tmp_path, capsys):
    # `mnemoflow import` counts and reads the file's verdicts before any benchmark is there: the
    # same one-line errors as the answer job's read, never a bare JSON or float message
    results = tmp_path / "results.json"
    out = tmp_path / "layer.yaml"
    argv = ["import", "--format", "locomo", str(results), "--name", "pub", "--benchmark", "locomo",
            "--out", str(out)]  # fmt: skip
    results.write_text('{"0": [{"question": "Q?", "response": "r"},]}')
    assert cli.main(argv) == 2
    assert f"{results}: not a readable JSON file" in capsys.readouterr().err
    results.write_text(json.dumps({"0": [{"question": "Q?", "response": "r", "llm_score": "yes"}]}))
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert f"{results}: conversation 0 record 0: field 'llm_score' must be 0 or 1" in error
    results.write_text(json.dumps({"x": []}))
    assert cli.main(argv) == 2
    assert f"{results}: conversation x: not a conversation index" in capsys.readouterr().err
    assert not out.exists()


def test_import_refuses_a_memorybench_response_that_is_not_text(tmp_path, capsys):
    # the answer job refuses it: so does the import, before the run starts
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"dataset": "Locomo-0", "test_idx": 1, "response": 5}) + "\n")
    argv = ["import", "--format", "memorybench", str(path), "--name", "pub", "--benchmark", "mb",
            "--out", str(tmp_path / "layer.yaml")]  # fmt: skip
    assert cli.main(argv) == 2
    assert f"{path}: (Locomo-0, 1): 'response' not text" in capsys.readouterr().err
    assert not (tmp_path / "layer.yaml").exists()


def test_a_longmemeval_eval_log_as_one_json_list_reads_as_its_lines_do(tmp_path, capsys):
    # the predictions reader takes a JSON list as well as JSON lines: so does the label reader,
    # at import and in the answer job (it split the list into lines and failed, or found none)
    _, _, questions = longmemeval_tables()
    ids = list(questions["question_id"])
    log = tmp_path / "eval-log.json"
    records = [
        {"question_id": q, "hypothesis": f"h{i}",
         "autoeval_label": {"model": "gpt-4o", "label": i == 0}}
        for i, q in enumerate(ids[:2])
    ]  # fmt: skip
    for text in (json.dumps(records, indent=1), json.dumps(records)):
        log.write_text(text)
        imported = read_imported(spec(log, "longmemeval"), questions, WHERE)
        assert imported.responses == {ids[0]: "h0", ids[1]: "h1"}
        assert imported.verdicts == {ids[0]: 1.0, ids[1]: 0.0}
        argv = ["import", "--format", "longmemeval", str(log), "--name", "pub", "--benchmark",
                "longmemeval_s", "--out", str(tmp_path / "layer.yaml")]  # fmt: skip
        assert cli.main(argv) == 0
        assert "the file's own judge: 0.5000 over 2 answers" in capsys.readouterr().out
    records[1]["autoeval_label"]["label"] = "yes"
    log.write_text(json.dumps(records, indent=1))
    with pytest.raises(ConfigError, match=r"record 1: 'autoeval_label.label' must be true/false"):
        read_imported(spec(log, "longmemeval"), questions, WHERE)
