"""A run on one real LoCoMo conversation with the locomo-audit errata: the data version it records,
and ``mnemoflow compare --versions`` scoring the same answers on the released and corrected gold."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
import yaml

from mnemoflow.cli import main as cli
from mnemoflow.data.errata import ERRATA_DIR
from mnemoflow.eval.metrics.locomo_f1 import locomo_f1
from tests.shared_data import shared_file
from tests.workflow import snakemake, workdir

pytestmark = pytest.mark.slow


def _in_first_60_of_conv26(entry) -> bool:
    conversation, _, index = entry["question_id"].partition("_q")
    return conversation == "conv-26" and int(index) < 60


@pytest.fixture(scope="module")
def errata_run(tmp_path_factory):
    source = shared_file("locomo", "locomo10.json")
    wd = workdir(tmp_path_factory.mktemp("errata"))
    # conv-26 with its first 60 questions (categories 1-4), read from ../shared at test time and
    # never stored in the repo; the overlay's entries for them: 5 correct, 2 drop, 5 evidence
    record = json.loads(source.read_text())[0]
    record["qa"] = record["qa"][:60]
    (wd / "conv26.json").write_text(json.dumps([record]))
    sha256 = hashlib.sha256((wd / "conv26.json").read_bytes()).hexdigest()
    shipped = yaml.safe_load((ERRATA_DIR / "locomo-audit.yaml").read_text())
    shipped["entries"] = [e for e in shipped["entries"] if _in_first_60_of_conv26(e)]
    (wd / "audit26.yaml").write_text(yaml.safe_dump(shipped))
    override = wd / "errata.yaml"
    override.write_text(
        json.dumps(
            {
                "run": {"benchmarks": ["locomo"], "systems": ["bm25_message"]},
                "benchmarks": {
                    "locomo": {
                        "loader": "locomo",
                        "source": {"path": "conv26.json", "sha256": sha256},
                        "errata": "audit26.yaml",
                        "shards": 1,
                        "reader": {"name": "locomo", "mode": "retrieval"},
                    }
                },
            }
        )
    )
    snakemake(wd, configfiles=(override,), targets=("results/summary.md",))
    return wd, shipped["entries"]


def test_the_run_records_its_data_version(errata_run):
    wd, entries = errata_run
    version = json.loads((wd / "results/locomo/prepared/data_version.json").read_text())
    counts = {a: sum(e["action"] == a for e in entries) for a in ("correct", "drop", "evidence")}
    assert version["errata"]["counts"] == counts == {"correct": 5, "drop": 2, "evidence": 5}
    assert version["errata"]["name"] == "locomo-audit"
    assert version["id"].startswith(version["source"]["sha256"][:12] + "+locomo-audit@")
    text = (wd / "results/summary.md").read_text()
    assert f"`{version['id']}`" in text and "5 correct, 2 drop, 5 evidence" in text
    # the loader's rules and their counts: notes.txt, data_version, summary.md, the report
    assert version["records"]["questions"] == 60
    assert version["records"]["questions_dropped"] == 0
    rule = "2 questions without evidence: kept (retrieval metrics skip them)"
    notes = (wd / "results/locomo/prepared/notes.txt").read_text().splitlines()
    assert notes[0] == "60 questions kept, 0 dropped by the loader's rules (docs/data.md)"
    assert rule in notes
    assert "| 60 (0 dropped) |" in text and f"- locomo: {rule}" in text


def test_compare_scores_the_same_run_on_both_versions(errata_run, tmp_path, capsys):
    wd, entries = errata_run
    assert cli(["compare", str(wd / "results"), "--versions", "--out", str(tmp_path)]) == 0
    assert "overlay `locomo-audit` (5 correct, 2 drop, 5 evidence" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "versions.tsv", sep="\t").set_index("metric")
    summary = pd.read_parquet(wd / "results/summary.parquet")
    micro = summary[summary["aggregate"] == "micro"].set_index("metric")["value"]
    # the released column is the run's own number
    for metric in ("f1", "j", "turn_evidence_recall"):
        assert table.loc[metric, "released"] == pytest.approx(micro[metric])
    f1 = table.loc["f1"]
    assert (f1["n_released"], f1["dropped"], f1["rescored"], f1["rejudge"]) == (60, 2, 5, 0)
    assert f1["n_corrected"] == 58
    j = table.loc["j"]  # a judged verdict: the 5 corrected questions need a judge call
    assert (j["n_released"], j["dropped"], j["rescored"], j["rejudge"]) == (60, 2, 0, 5)
    assert j["n_corrected"] == 53
    # worked example: the corrected F1 is the released per-question F1 with the 2 drops left
    # out and the 5 corrected questions re-scored against the audit's answer
    answers = pd.concat(
        pd.read_parquet(p) for p in wd.glob("results/locomo/*/qa/step0/shard*/answers.parquet")
    ).set_index("question_id")["response"]
    judged = pd.concat(
        pd.read_parquet(p) for p in wd.glob("results/locomo/*/qa/step0/shard*/judgements.parquet")
    )
    f1_of = judged[judged["metric"] == "f1"].set_index("question_id")["value"].to_dict()
    questions = pd.read_parquet(wd / "results/locomo/prepared/questions.parquet")
    category = {
        q: json.loads(m)["category"]
        for q, m in zip(questions.question_id, questions.meta, strict=True)
    }
    for e in entries:
        if e["action"] == "drop":
            del f1_of[e["question_id"]]
        elif e["action"] == "correct":
            q = e["question_id"]
            f1_of[q] = locomo_f1(answers[q], e["answer"], category[q])
    assert f1["corrected"] == pytest.approx(sum(f1_of.values()) / 58)


def test_rejudge_judges_the_corrected_questions_with_the_runs_judge(errata_run, tmp_path):
    wd, entries = errata_run
    out = tmp_path / "rejudged"
    assert cli(["compare", str(wd / "results"), "--versions", "--rejudge", "--out", str(out)]) == 0
    table = pd.read_csv(out / "versions.tsv", sep="\t").set_index("metric")
    j = table.loc["j"]  # the 5 corrected answers judged by the run's (offline) judge on new gold
    assert (j["dropped"], j["rescored"], j["rejudge"], j["n_corrected"]) == (2, 5, 0, 58)
    # the other metrics do not change with --rejudge
    assert table.loc["f1", "rescored"] == 5 and table.loc["turn_evidence_recall", "rescored"] == 7


def test_rejudge_refuses_another_judge_than_the_runs(errata_run, tmp_path, capsys):
    wd, _ = errata_run
    config = tmp_path / "judge.yaml"
    config.write_text(
        yaml.safe_dump({"models": {"judge": {"base_url": "http://127.0.0.1:9/v1", "model": "j"}}})
    )
    args = [
        "compare",
        str(wd / "results"),
        "--versions",
        "--rejudge",
        "--judge-config",
        str(config),
    ]
    assert cli(args) != 0
    err = capsys.readouterr().err
    assert "the run was judged by offline-heuristic/" in err and "would judge with j/" in err
