"""An imported AMemGym eval-output in the workflow: on the tiny environment the reference's
per-user folder is the system ``pub`` of the interactive protocol; its dialogues jobs read the
folder (no model call), and the summary, the drill-down and ``export`` show it like any run."""

import json

import pandas as pd
import pytest

from mnemoflow import cli
from mnemoflow.data.amemgym import read_environment
from mnemoflow.eval.imported_amemgym import output_sha256, read_output
from tests.amemgym_fixtures import TINY_BENCHMARK, environment_workdir, write_reference
from tests.workflow import snakemake

pytestmark = pytest.mark.slow

WRONG = {("ana", 1, 0), ("ben", 2, 1), ("ben", 0, 0)}
BROKEN = {("ana", 2, 1)}


def test_an_imported_eval_output_is_scored_reported_and_exported_like_a_run(tmp_path):
    config = {
        "models": {"embedder": {"backend": "offline"}},
        "run": {"benchmarks": ["amemgym_tiny"], "systems": ["pub"]},
        "benchmarks": {"amemgym_tiny": TINY_BENCHMARK},
    }
    wd, override = environment_workdir(tmp_path, config)
    write_reference(wd / "published", read_environment(wd / "data.json"), WRONG, BROKEN)
    config["systems"] = {
        "pub": {
            "type": "imported",
            "format": "amemgym",
            "path": "published",
            "sha256": output_sha256(wd / "published"),
        }  # fmt: skip
    }
    override.write_text(json.dumps(config))
    snakemake(wd, configfiles=[override])

    shard = wd / "results/amemgym_tiny/pub/interactive/step2/shard0"
    ledger = json.loads((shard / "dialogues.ledger.json").read_text())
    assert "published sha256" in json.dumps(ledger)
    assert pd.read_parquet(shard / "dialogues.parquet").empty  # nothing conversed
    summary = pd.read_parquet(wd / "results/summary.parquet")
    accuracy = summary[(summary["metric"] == "accuracy") & (summary["aggregate"] == "micro")]
    by_step = dict(zip(accuracy.step, accuracy.value, strict=True))
    # 4 answers per period; wrong: period 0 one, period 1 one, period 2 two (one unparseable)
    assert by_step == {0: 0.75, 1: 0.75, 2: 0.5}
    assert "| pub | interactive |" in (wd / "results/summary.md").read_text()
    chunks = "".join(p.read_text() for p in (wd / "results").rglob("questions/*.js"))
    assert "What should I cook for dinner?" in chunks and "imported:amemgym" in chunks

    out = tmp_path / "export"
    argv = ["export", "--results", str(wd / "results"), "--format", "amemgym", "--out", str(out)]
    assert cli.main([*argv, "--data", str(wd / "data.json")]) == 0
    (exported,) = out.glob("*pub.interactive.step2.eval-output.json")
    content = json.loads(exported.read_text())
    assert sorted(content) == ["ana", "ben"]
    assert content["ana"]["overall_metrics"]["accuracy"] == [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    # and read back as an imported system, the exported file holds the folder's replies
    keys = ["user_id", "period", "question_index", "reply", "parse_ok"]
    again, first = (read_output(p).replies[keys] for p in (exported, wd / "published"))
    rows = [f.sort_values(keys[:3]).values.tolist() for f in (again, first)]
    assert rows[0] == rows[1]
