"""Relocatable results: a finished checkout copied with its results (``cp -a``) is up to date.

No rule's inputs, outputs or params hold an absolute path of the checkout (the shipped persona
pool that ``generate_user`` reads is named relative to the working directory), so a copy in
another place plans nothing. The run generates its environment with a model (offline), the part
of the workflow whose input used to be an absolute path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mnemoflow.environment.personas import PERSONAS, personas_file
from tests.workflow import REPO

pytestmark = pytest.mark.slow

COPY_IGNORE = shutil.ignore_patterns(
    ".git", "results", ".snakemake", "__pycache__", ".venv", "*.egg-info", ".*_cache"
)
BENCH = "amemgym_generated"
OVERRIDE = {
    "models": {"embedder": {"backend": "offline"}},
    "run": {"benchmarks": [BENCH], "systems": ["native"]},
    "benchmarks": {
        BENCH: {
            "systems": ["native"],
            "generate": {
                "method": "llm",
                "preset": "v1.base",
                "num_user_profiles": 1,
                "num_periods": 1,
                "num_questions": 2,
            },
        }
    },
}


def snakemake_in(checkout: Path, *args: str) -> str:
    """The checkout's own workflow, package and config, run in the checkout (as `make run`)."""
    command = [
        sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "--directory",
        str(checkout), "--cores", "2", "--configfile", "config.yaml", "relocate.yaml", *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, cwd=checkout
    )
    if result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result.stdout + result.stderr


def test_the_shipped_personas_are_named_relative_to_the_working_directory(tmp_path):
    assert personas_file({}, REPO) == "data/amemgym_personas.jsonl"
    assert personas_file({}, tmp_path) == str(PERSONAS)  # a checkout elsewhere: absolute
    given = {"personas": {"path": "/data/nemotron/train.parquet"}}
    assert personas_file(given, REPO) == "/data/nemotron/train.parquet"  # the user's, as given


def test_a_copied_finished_checkout_plans_nothing(tmp_path):
    checkout = tmp_path / "here" / "mnemoflow"
    shutil.copytree(REPO, checkout, ignore=COPY_IGNORE)
    (checkout / "relocate.yaml").write_text(yaml.safe_dump(OVERRIDE))
    snakemake_in(checkout)
    assert (checkout / "results" / "summary.md").is_file()
    assert (checkout / f"results/{BENCH}/environment/data.json").is_file()

    moved = tmp_path / "elsewhere" / "deeper" / "mnemoflow"
    shutil.copytree(checkout, moved, symlinks=True)  # copy2: modification times preserved
    log = snakemake_in(moved, "--dry-run")
    assert "Nothing to be done" in log, log[-3000:]
