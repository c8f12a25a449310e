"""Self-evolving AWI in the workflow (offline backend, tiny environment): the dialogues rule
writes evolution.parquet beside each step's outputs, step k+1's snapshot starts from step k's
evolved section, and the summary and report show the self-evolution table."""

import pandas as pd
import pytest

from mnemoflow.memory.writer import MEMORY_TYPES
from tests.amemgym_fixtures import TINY_BENCHMARK, environment_workdir
from tests.workflow import snakemake

pytestmark = pytest.mark.slow

CONFIG = {
    "models": {"embedder": {"backend": "offline"}},
    "run": {"benchmarks": ["amemgym_tiny"], "systems": ["awi_evolve_question_only"]},
    "benchmarks": {"amemgym_tiny": TINY_BENCHMARK},
}
SHARD = "results/amemgym_tiny/awi_evolve_question_only/interactive/step{step}/shard0"


def test_evolution_records_reach_the_summary_and_report(tmp_path):
    wd, override = environment_workdir(tmp_path, CONFIG)
    snakemake(wd, configfiles=[override])

    steps = [pd.read_parquet(wd / SHARD.format(step=k) / "evolution.parquet") for k in range(3)]
    assert [len(s) for s in steps] == [2, 2, 2]  # 2 users per period
    assert steps[0].changed.tolist() == [True, True]
    assert (steps[0].old_section == MEMORY_TYPES).all()
    # step 1 starts from the section step 0 evolved (read back from the snapshot)
    assert steps[1].old_section.tolist() == steps[0].new_section.tolist()
    summary = pd.read_parquet(wd / "results/summary.parquet")
    changed = summary[(summary["metric"] == "section_changed") & (summary["aggregate"] == "micro")]
    assert changed.sort_values("step")["value"].tolist() == [float(s.changed.mean()) for s in steps]
    text = (wd / "results/summary.md").read_text()
    assert "## amemgym_tiny: self-evolution (AMemGym Table 3)" in text
    assert "Self-evolution (AMemGym Table 3)" in (wd / "results/report.html").read_text()
