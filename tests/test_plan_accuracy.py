"""The plan held against the ledgers of the offline run it plans, per family and for a memory
product: per (benchmark, role) with at least 20 calls in the ledgers, calls within 10 % and tokens
in / out within 25 %, planned in a fresh folder (no ``results/``, no cache). docs/plan.md ("How
close it is") gives the measured ratios and what is compared where the cache answered more than
the plan foresaw."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from mnemoflow.planning.accuracy import ratios
from tests.amemgym_fixtures import write_environment
from tests.workflow import REPO, TINY, snakemake, workdir


def plan_json(wd, *configfiles) -> dict:
    """``mnemoflow plan --json`` of the run in ``wd`` (which holds no results yet)."""
    out = subprocess.run(
        [sys.executable, "-m", "mnemoflow.cli", "plan", "--json", "--directory", str(wd),
         "--configfile", *map(str, configfiles)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def layer(path, data: dict):
    """A config layer written to ``path``."""
    path.write_text(yaml.safe_dump(data))
    return path


def assert_close(planned: dict, results) -> dict:
    """Calls within 10 %; tokens per computed call within 25 %, and the tokens themselves unless
    the ledgers' cache answered more calls than the plan foresaw (a reply the same for different
    prompts: ``mnemoflow.planning.accuracy``)."""
    found = ratios(planned, results)
    assert found, "no (benchmark, role) with 20 ledger calls"
    for pair, ratio in found.items():
        assert 0.9 <= ratio["calls"] <= 1.1, (pair, ratio)
        unforeseen = ratio.get("computed", 1.0) > 1.1
        for name in ("tokens_in", "tokens_out"):
            if f"{name}/computed" in ratio:
                assert 0.75 <= ratio[f"{name}/computed"] <= 1.25, (pair, name, ratio)
            if name in ratio and not unforeseen:
                assert 0.75 <= ratio[name] <= 1.25, (pair, name, ratio)
    print("plan / ledgers:", found)
    return found


def test_static_qa_plan_matches_the_tiny_runs_ledgers(tiny_run, tmp_path):
    fresh = workdir(tmp_path)  # the same config, nothing run, nothing cached
    planned = plan_json(fresh, fresh / "config.yaml", TINY)
    assert not (fresh / "results").exists()
    found = assert_close(planned, tiny_run / "results")
    assert {role for _, role in found} == {"agent", "judge"}


@pytest.mark.slow
def test_interactive_plan_matches_an_offline_runs_ledgers(tmp_path):
    wd = workdir(tmp_path)
    write_environment(wd)
    override = layer(
        wd / "interactive.yaml",
        {
            "models": {"embedder": {"backend": "offline"}},
            # three systems: the offline agent replies alike whatever its memory, so two of
            # the three systems' user requests are cache hits the plan cannot foresee
            "run": {"benchmarks": ["amemgym_tiny"], "systems": ["awi_1", "rag", "native"]},
            # one message per write: enough writer calls (20) in two tiny users
            "systems": {
                "awi_1": {
                    "type": "agentic_incontext",
                    "update_batch": 1,
                    "local_window": 2,
                    "prompt": "organizer",
                }
            },
            "benchmarks": {
                "amemgym_tiny": {
                    "loader": "amemgym",
                    "protocols": ["interactive"],
                    "source": {"path": "data.json"},
                    "interactive": {"num_rounds_update": 2},
                }
            },
        },
    )
    planned = plan_json(wd, wd / "config.yaml", override)  # before the run: nothing there
    snakemake(wd, configfiles=[wd / "config.yaml", override])
    found = assert_close(planned, wd / "results")
    assert {"agent", "memory_writer", "embedder", "user"} <= {role for _, role in found}


@pytest.mark.slow
def test_feedback_plan_matches_an_offline_runs_ledgers(tmp_path):
    wd = workdir(tmp_path)
    override = layer(
        wd / "feedback.yaml",
        {
            "models": {"embedder": {"backend": "offline"}},
            "run": {"benchmarks": ["synthetic_feedback"], "systems": ["none", "rag"]},
        },
    )
    planned = plan_json(wd, wd / "config.yaml", override)
    snakemake(wd, configfiles=[wd / "config.yaml", override])
    found = assert_close(planned, wd / "results")
    assert {"agent", "embedder"} <= {role for _, role in found}


@pytest.mark.slow
def test_a_memory_products_writes_are_planned_as_its_offline_twin_makes_them(tmp_path):
    """Mem0-G (mem0's facts and its graph's entities, relations and deletions per batch, the
    query's entities per search) on the synthetic benchmark's one user, three sessions."""
    wd = workdir(tmp_path)
    override = layer(
        wd / "mem0_graph.yaml",
        {
            "run": {"benchmarks": ["synthetic"], "systems": ["mem0_graph"]},
            "benchmarks": {
                "synthetic": {
                    "shards": 1,
                    "params": {"users": 1, "periods": 1, "sessions_per_period": 3},
                }
            },
        },
    )
    planned = plan_json(wd, TINY, override)
    snakemake(wd, configfiles=[TINY, override])
    found = assert_close(planned, wd / "results")
    assert {"memory_writer", "embedder"} <= {role for _, role in found}
