"""Static QA end to end on the real LoCoMo file: offline backend, two memory systems."""

import json

import pandas as pd
import pytest
import yaml

from mnemoflow.cli import main as cli
from mnemoflow.data.tables import FOOTPRINT_METRICS
from mnemoflow.eval.static_qa.diagnosis import CAUSES
from tests.shared_data import shared_file
from tests.workflow import copy_run, ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

CATEGORIES = {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}


@pytest.fixture(scope="module")
def locomo_run(tmp_path_factory):
    source = shared_file("locomo", "locomo10.json")  # absent folder: skip; absent file: fail
    wd = workdir(tmp_path_factory.mktemp("locomo"))
    override = wd / "locomo.yaml"
    override.write_text(
        json.dumps(
            {
                "run": {"benchmarks": ["locomo"], "systems": ["none", "bm25_message"]},
                "benchmarks": {
                    "locomo": {
                        "loader": "locomo",
                        "source": {"path": str(source)},
                        "shards": 2,
                        "reader": {"name": "locomo", "mode": "retrieval"},
                    }
                },
            }
        )
    )
    snakemake(wd, configfiles=(override,))
    return wd, override, source


def test_per_category_f1_and_diagnosis(locomo_run):
    wd, _, _ = locomo_run
    summary = pd.read_parquet(wd / "results/summary.parquet")
    f1 = summary[(summary["metric"] == "f1") & summary["aggregate"].str.startswith("type:")]
    for system in ("none", "bm25_message"):
        types = set(f1[f1["system"] == system]["aggregate"].str.removeprefix("type:"))
        assert types == CATEGORIES
    micro = summary[summary["aggregate"] == "micro"].set_index(["system", "metric"])["value"]
    assert micro[("bm25_message", "j")] > micro[("none", "j")]
    assert micro[("bm25_message", "turn_evidence_recall")] > 0.3
    assert micro[("none", "turn_evidence_recall")] == 0.0
    # <cause>_rate scores are shares of the wrong answers.
    assert micro[("none", "write_failure_rate")] > 0.95  # no memory: evidence never stored
    assert micro[("bm25_message", "write_failure_rate")] == 0.0  # BM25 stores every turn
    failed = micro[("bm25_message", "read_failure_rate")]
    assert failed + micro[("bm25_message", "utilization_failure_rate")] > 0.9
    # The diagnosis table's outcomes are shares of all questions: they add up to 1 per run.
    diagnosis = pd.read_parquet(wd / "results/diagnosis.parquet")
    overall = diagnosis[diagnosis["question_type"] == "all"]
    assert overall.groupby("system")["rate"].sum().to_dict() == pytest.approx(
        {"none": 1.0, "bm25_message": 1.0}
    )
    text = (wd / "results/summary.md").read_text()
    assert "## locomo" in text and "F1" in text and "evidence recall" in text
    assert "### locomo: j per question type" in text
    assert "### locomo: f1 per question type" in text


def test_second_run_hits_the_cache_only(locomo_run):
    wd, override, _ = locomo_run
    snakemake(wd, "--forcerun", "answer", "judge", configfiles=(override,))
    for name in ("answers.ledger.json", "judgements.ledger.json"):
        for ledger in ledgers(wd, name):
            totals = ledger["totals"]
            assert totals["calls"] > 0 and totals["cache_hits"] == totals["calls"]


def test_score_command_reproduces_the_workflow_numbers(locomo_run, tmp_path):
    # Predictions and the memory's rankings from the workflow's answers, re-scored by the CLI:
    # the same micro and per-category F1 and J, and the same evidence recall.
    wd, _, source = locomo_run
    answers = pd.concat(
        pd.read_parquet(p)
        for p in wd.glob("results/locomo/bm25_message/qa/step0/*/answers.parquet")
    )
    predictions, retrievals = tmp_path / "predictions.jsonl", tmp_path / "retrievals.jsonl"
    with predictions.open("w") as hyp, retrievals.open("w") as ret:
        for row in answers.to_dict("records"):
            qid = row["question_id"]
            hyp.write(json.dumps({"question_id": qid, "hypothesis": row["response"]}) + "\n")
            ranked = [{"corpus_id": i} for i in row["ranked_ids"]]
            ret.write(
                json.dumps({"question_id": qid, "retrieval_results": {"ranked_items": ranked}})
                + "\n"
            )
    out = tmp_path / "scored"
    files = ["--predictions", str(predictions), "--retrievals", str(retrievals)]
    assert (
        cli(["score", "--benchmark", "locomo", "--data", str(source), *files, "--out", str(out)])
        == 0
    )
    rescored = _by_aggregate(pd.read_parquet(out / "scores.parquet"))
    workflow = _by_aggregate(
        pd.read_parquet(wd / "results/locomo/bm25_message/qa/step0/scores.parquet")
    )
    keys = [
        (metric, aggregate)
        for metric, aggregate in workflow.index
        if metric in ("f1", "j") and (aggregate == "micro" or aggregate.startswith("type:"))
    ]
    assert {a for _, a in keys} == {"micro", *(f"type:{c}" for c in CATEGORIES)}
    keys.append(("turn_evidence_recall", "micro"))
    for key in keys:
        assert rescored[key] == pytest.approx(workflow[key]), key


def test_an_exported_run_imported_back_is_judged_to_its_own_numbers(locomo_run, tmp_path):
    # export -> import -> the workflow re-judges the imported answers beside the run's own: every
    # judged and retrieval metric of the run, exactly; only what needs the memory itself (the
    # write / read diagnosis, retrieval latency, snapshot size) is not the file's to give
    finished, override, source = locomo_run
    wd = copy_run(finished, tmp_path / "run")
    out = wd / "exported"
    argv = ["export", "--results", str(wd / "results"), "--format", "locomo", "--data"]
    assert cli([*argv, str(source), "--out", str(out), "--benchmark", "locomo"]) == 0
    exported = out / "locomo.bm25_message.qa.step0.samples.json"
    layer = wd / "import.yaml"
    argv = ["import", "--format", "locomo", str(exported), "--name", "published"]
    argv += ["--benchmark", "locomo", "--with", "none", "--with", "bm25_message"]
    assert cli([*argv, "--out", str(layer)]) == 0
    log = snakemake(wd, configfiles=(override, layer), targets=["results/summary.parquet"])
    assert "localrule prepare" not in log  # adding a system to the list re-prepares nothing
    step = wd / "results/locomo/{}/qa/step0/scores.parquet"
    ours = _by_aggregate(pd.read_parquet(str(step).format("bm25_message")))
    imported = _by_aggregate(pd.read_parquet(str(step).format("published")))
    memory_bound = {*FOOTPRINT_METRICS, *(f"{cause}_rate" for cause in CAUSES)}
    keys = [k for k in ours.index if k[0] not in memory_bound]
    assert {"j", "f1", "turn_evidence_recall", "j:unscored"} <= {m for m, _ in keys}
    for key in keys:
        assert imported[key] == pytest.approx(ours[key], abs=1e-12), key
    summary = pd.read_parquet(wd / "results/summary.parquet")
    assert {"none", "bm25_message", "published"} <= set(summary["system"])
    for path in wd.glob("results/locomo/published/qa/step0/shard*/answers.ledger.json"):
        ledger = json.loads(path.read_text())
        assert ledger["totals"]["calls"] == 0  # read from the file, no model asked
        assert ledger["imported"]["sha256"] == yaml_entry(layer)["sha256"]


def yaml_entry(layer):
    return yaml.safe_load(layer.read_text())["systems"]["published"]


def _by_aggregate(scores):
    return scores.set_index(["metric", "aggregate"])["value"]
