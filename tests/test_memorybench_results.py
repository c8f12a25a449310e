"""A local copy of THUIR/MemoryBench-Results (manifest.jsonl + summary.json per run, the layout
its own client reads) as published-number rows, and compared with a run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.cli import main
from mnemoflow.data.memorybench_results import read_results
from mnemoflow.data.tables import SUMMARY, write_table
from mnemoflow.data.validate import DataError

RUNS = [
    # the current manifest form, and the older one-string "setting"
    {"exp": "off-policy", "model": "Qwen3-8B", "baseline": "bm25_message", "run_id": "r1"},
    {"setting": "off-policy-Qwen3-8B", "baseline": "a_mem", "run_id": "r2"},
]


def write_release(root, runs=RUNS, summaries=None):
    summaries = summaries or [
        {"summary": {"average": 0.41, "weighted_average": 0.43, "z_score": 0.12, "n": 30}},
        {"summary": {"average": 0.38, "z_score": -0.05, "per_dataset": {"JRE-L": 0.2}}},
    ]
    lines = []
    for run, summary in zip(runs, summaries, strict=True):
        relative = f"off-policy/{run['run_id']}"
        entry = {"dataset_type": "domain", "set_name": "Open-Domain", "relative_dir": relative}
        entry.update(run, files=["summary.json", "predict.json"])
        lines.append(json.dumps(entry))
        (root / relative).mkdir(parents=True)
        (root / relative / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_every_summary_number_is_a_published_row(tmp_path):
    rows = read_results(write_release(tmp_path))
    assert len(rows) == 6  # 4 + 2 numbers; the nested per_dataset breakdown is not a cell
    first = rows[rows["row"] == "bm25_message"].set_index("metric")
    assert first.loc["z_score", "value"] == 0.12 and first.loc["n", "value"] == 30
    assert set(rows["table"]) == {"off-policy/Qwen3-8B/domain:Open-Domain"}
    assert set(rows["protocol"]) == {"off_policy"} and set(rows["model"]) == {"Qwen3-8B"}
    amem = rows[rows["row"] == "a_mem"].iloc[0]
    assert amem["source"].endswith("off-policy/r2/summary.json summary.average")
    assert amem["note"] == "run r2"


@pytest.mark.parametrize(
    ("runs", "summaries", "message"),
    [
        ([{**RUNS[0], "baseline": ""}], None, r"line 1: field 'baseline' must be a non-empty"),
        ([{"setting": "online-x", "baseline": "b", "run_id": "r"}], None, r"line 1: .*'setting'"),
        ([RUNS[0], {**RUNS[0], "run_id": "r3"}], None, r"run 'r3' repeats 'r1'"),
        (RUNS[:1], [{"scores": {}}], r"r1/summary.json: missing field 'summary'"),
    ],
)
def test_malformed_release_fails_with_one_line(tmp_path, runs, summaries, message):
    summaries = summaries or [{"summary": {"z_score": 0.1}}] * len(runs)
    root = write_release(tmp_path, runs, summaries)
    with pytest.raises(DataError, match=message) as caught:
        read_results(root)
    assert "\n" not in str(caught.value)


def test_compare_a_memorybench_run_with_the_release(tmp_path, capsys):
    """Our bm25_message run's normalized z_score .20 against the release's .12: diff +.08; a
    z-score is no proportion and has no items here, so it has no interval and no flag."""
    release = write_release(tmp_path / "release")
    run = tmp_path / "run"
    row = {"benchmark": "mb_open", "system": "bm25_message", "protocol": "off_policy", "step": 0}
    write_table(
        pd.DataFrame(
            [{**row, "metric": "z_score", "aggregate": "normalized", "value": 0.2, "n": 30}]
        ),
        run / "summary.parquet",
        SUMMARY,
    )
    args = ["compare", str(run), "--memorybench-results", str(release), "--benchmark", "mb_open"]
    args += ["--published", "memorybench-results", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert "6 published cells; 1 paired with the run" in capsys.readouterr().out
    cells = pd.read_csv(tmp_path / "out" / "published.tsv", sep="\t", keep_default_na=False)
    cell = cells[cells["ours"] != ""].iloc[0]
    assert (cell["row"], cell["metric"], cell["published"]) == ("bm25_message", "z_score", 0.12)
    assert float(cell["diff"]) == pytest.approx(0.08) and cell["outside"] == ""
