"""Static QA end to end on the real LoCoMo file: offline backend, two memory systems."""

import json

import pandas as pd
import pytest

from mnemoflow.cli import main as cli
from tests.memory_support import SHARED_DATA
from tests.workflow import ledgers, snakemake, workdir

pytestmark = pytest.mark.slow

CATEGORIES = {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}


@pytest.fixture(scope="module")
def locomo_run(tmp_path_factory):
    source = SHARED_DATA / "locomo" / "locomo10.json"  # beside the checkout or its worktree
    if not source.is_file():
        pytest.skip(f"LoCoMo not found at {source}")
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
    diagnosis = pd.read_parquet(wd / "results/diagnosis.parquet")
    rates = diagnosis[diagnosis["question_type"] == "all"].set_index(["system", "failure"])["rate"]
    assert rates[("none", "write")] > 0.95  # no memory: the evidence was never stored
    assert rates[("bm25_message", "write")] == 0.0  # BM25 stores every turn
    assert rates[("bm25_message", "read")] + rates[("bm25_message", "utilization")] > 0.9
    text = (wd / "results/summary.md").read_text()
    assert "## locomo" in text and "F1" in text and "evidence recall" in text


def test_second_run_hits_the_cache_only(locomo_run):
    wd, override, _ = locomo_run
    snakemake(wd, "--forcerun", "answer", "judge", configfiles=(override,))
    for name in ("answers.ledger.json", "judgements.ledger.json"):
        for ledger in ledgers(wd, name):
            totals = ledger["totals"]
            assert totals["calls"] > 0 and totals["cache_hits"] == totals["calls"]


def test_score_command_reproduces_the_workflow_numbers(locomo_run, tmp_path):
    wd, _, source = locomo_run
    answers = pd.concat(
        pd.read_parquet(p)
        for p in wd.glob("results/locomo/bm25_message/qa/step0/*/answers.parquet")
    )
    predictions = tmp_path / "predictions.jsonl"
    with predictions.open("w") as handle:
        for row in answers.to_dict("records"):
            handle.write(
                json.dumps({"question_id": row["question_id"], "hypothesis": row["response"]})
            )
            handle.write("\n")
    out = tmp_path / "scored"
    assert cli(["score", "--benchmark", "locomo", "--data", str(source), "--predictions",
                str(predictions), "--out", str(out)]) == 0  # fmt: skip
    rescored = _micro(pd.read_parquet(out / "scores.parquet"))
    workflow = _micro(pd.read_parquet(wd / "results/locomo/bm25_message/qa/step0/scores.parquet"))
    for metric in ("f1", "j"):
        assert rescored[metric] == pytest.approx(workflow[metric])


def _micro(scores):
    return scores[scores["aggregate"] == "micro"].set_index("metric")["value"]
