"""The shipped default AMemGym environments (config.yaml's ``amemgym_procedural`` and
``amemgym_generated``, not a fixture) give meaningful numbers with the offline pair: the upper
bound is high, a memory-less agent is at chance, and agents with a memory are well above it.

Before the offline assistant read its context as beliefs (issue 19), the upper bound was 0.217
against random 0.250 and the memory-less ``none`` would have scored 0.944, first place: every
memory score of the default run was an artifact. These tests fail if that comes back.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tests.workflow import snakemake, workdir

pytestmark = pytest.mark.slow

SYSTEMS = {"amemgym_procedural": ["none", "native", "awe_2_4_30"], "amemgym_generated": None}
#: The config's own environments and systems; only the replay protocol and the model load of the
#: sentence-transformers embedder are left out, for time.
OVERRIDE = {
    "models": {"embedder": {"backend": "offline"}},
    "run": {"benchmarks": list(SYSTEMS)},
    "benchmarks": {
        "amemgym_procedural": {
            "protocols": ["interactive"],
            "systems": SYSTEMS["amemgym_procedural"],
        }
    },
}


@pytest.fixture(scope="module")
def headline(tmp_path_factory) -> pd.DataFrame:
    """Per (benchmark, system, metric): the mean over periods at the last step."""
    wd = workdir(tmp_path_factory.mktemp("amemgym_default"))
    override = wd / "default_amemgym.yaml"
    override.write_text(yaml.safe_dump(OVERRIDE))
    snakemake(wd, configfiles=[override], targets=["results/summary.parquet"], timeout=900)
    summary = pd.read_parquet(wd / "results" / "summary.parquet")
    summary = summary[summary["aggregate"] == "mean_over_periods"]
    last = summary.groupby("benchmark").step.transform("max")
    return summary[summary.step == last].set_index(["benchmark", "system", "metric"]).value


@pytest.mark.parametrize("benchmark", list(SYSTEMS))
def test_upper_bound_is_high_and_far_above_random(headline, benchmark):
    upper = headline[benchmark, "none", "upper_bound"]
    random = headline[benchmark, "none", "random"]
    assert upper >= 0.9 and upper - random >= 0.5, (upper, random)
    assert headline[benchmark, "none", "upper_below_random"] == 0


@pytest.mark.parametrize("benchmark", list(SYSTEMS))
def test_a_memory_less_agent_scores_near_zero(headline, benchmark):
    assert abs(headline[benchmark, "none", "memory_score"]) <= 0.1


@pytest.mark.parametrize("benchmark", list(SYSTEMS))
def test_agents_with_memory_are_well_above_the_memory_less_one(headline, benchmark):
    none = headline[benchmark, "none", "memory_score"]
    systems = set(headline.loc[benchmark].index.get_level_values("system")) - {"none"}
    assert {"native"} <= systems
    for system in systems:
        assert headline[benchmark, system, "memory_score"] >= none + 0.5, system
