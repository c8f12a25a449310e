"""The prepare rule on a local file of each real benchmark format, and its rerun on a new file.

LoCoMo goes through the whole workflow in test_workflow_locomo.py; here the other three formats
go through `prepare` alone: MemoryBench's LexEval-QA raw file from the shared data, and small
LongMemEval and AMemGym files in their official layouts (the loaders' test fixtures).
"""

import json
import os

import pandas as pd
import pytest

from tests.shared_data import shared_file
from tests.test_data_amemgym import user
from tests.test_data_longmemeval import official_records
from tests.workflow import planned_outputs, snakemake, workdir

pytestmark = pytest.mark.slow


def _prepare(wd, name, spec, *args):
    """Snakemake with only ``name`` configured, targeting its prepared questions table."""
    override = wd / f"{name}.json"
    override.write_text(json.dumps({"run": {"benchmarks": [name]}, "benchmarks": {name: spec}}))
    target = f"results/{name}/prepared/questions.parquet"
    return snakemake(wd, *args, configfiles=(override,), targets=(target,))


def _questions(wd, name):
    return pd.read_parquet(wd / f"results/{name}/prepared/questions.parquet")


def test_prepare_lexeval_qa_from_the_memorybench_raw_file(tmp_path):
    """config.yaml's lexeval_qa entry, with the shared data's absolute paths."""
    root = shared_file("memorybench")  # absent folder: skip; absent file: fail
    source = root / "raw" / "LexEval-QA_5_4.jsonl"
    spec = {
        "loader": "memorybench",
        "source": {"path": str(source)},
        "select": {"dataset": "LexEval-QA"},
        "configs": str(root / "configs" / "datasets"),
    }
    wd = workdir(tmp_path)
    _prepare(wd, "lexeval_qa", spec)
    questions = _questions(wd, "lexeval_qa")
    # the official split: Random(42) samples the registry's sample_count (250) of the 500 items,
    # a fresh Random(42) takes ceil(0.2 * 250) = 50 of those as test; train = the other 200
    assert questions["split"].value_counts().to_dict() == {"train": 200, "test": 50}
    # the benchmark as the config names it (what the answers carry); the loader is recorded
    assert set(questions["benchmark"]) == {"lexeval_qa"}
    version = json.loads((wd / "results/lexeval_qa/prepared/data_version.json").read_text())
    assert version["loader"] == "memorybench"
    assert set(questions["dataset"]) == {"LexEval-QA"}
    assert questions["question"].str.len().gt(0).all()


def test_prepare_longmemeval_and_rerun_when_the_file_is_replaced(tmp_path):
    source = tmp_path / "longmemeval_s_cleaned.json"
    source.write_text(json.dumps(official_records()))
    spec = {"loader": "longmemeval", "variant": "s", "source": {"path": str(source)}}
    wd = workdir(tmp_path)
    _prepare(wd, "lme", spec)
    ids = [record["question_id"] for record in official_records()]
    assert list(_questions(wd, "lme")["question_id"]) == ids
    assert "Nothing to be done" in _prepare(wd, "lme", spec, "--dry-run")

    # A replaced file (one record fewer, newer than the tables) re-plans prepare and re-prepares.
    for table in (wd / "results/lme/prepared").glob("*.parquet"):
        earlier = table.stat().st_mtime - 60  # no reliance on the clock's resolution
        os.utime(table, (earlier, earlier))
    source.write_text(json.dumps(official_records()[:2]))
    planned = planned_outputs(_prepare(wd, "lme", spec, "--dry-run"))
    assert "results/lme/prepared/questions.parquet" in planned
    _prepare(wd, "lme", spec)
    assert len(_questions(wd, "lme")) == 2


def test_prepare_amemgym_from_a_local_data_json(tmp_path):
    source = tmp_path / "data.json"
    source.write_text(json.dumps([user("u-1"), user("u-2")]))
    wd = workdir(tmp_path)
    _prepare(wd, "amemgym", {"loader": "amemgym", "source": {"path": str(source)}})
    questions = _questions(wd, "amemgym")
    assert set(questions["benchmark"]) == {"amemgym"}
    # 2 users x 2 questions x 3 periods (every checkpoint state is among the choices)
    assert questions.groupby("episode_id").size().to_dict() == {"u-1": 6, "u-2": 6}
    assert sorted(questions["checkpoint"].unique()) == [0, 1, 2]
    sessions = pd.read_parquet(wd / "results/amemgym/prepared/sessions.parquet")
    # 2 users x 12 turns each (the fixture's released messages)
    assert sessions.groupby("episode_id").size().to_dict() == {"u-1": 12, "u-2": 12}
