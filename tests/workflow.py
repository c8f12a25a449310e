"""Helpers to run the repository's Snakemake workflow in a scratch directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"


#: A one-shard synthetic run small enough for tests that start model servers (2 users, 1 period):
#: the override the managed-endpoint tests lay over the default config.
SMALL_SYNTHETIC = {
    "run": {"benchmarks": ["synthetic"], "systems": ["none"]},
    "benchmarks": {
        "synthetic": {
            "shards": 1,
            "params": {
                "users": 2,
                "periods": 1,
                "sessions_per_period": 2,
                "turns_per_session": 4,
                "attributes_per_user": 3,
                "updates_per_period": 0,
                "seed": 3,
            },
        }
    },
}


def on_policy_feedback(batch_size: int) -> dict:
    """The benchmark entry of a tiny on-policy feedback run: 4 synthetic_feedback items, one
    step, at most 2 rounds, ``batch_size`` dialogues a batch."""
    return {
        "protocols": ["on_policy"],
        "params": {"items": 4, "seed": 3},
        "feedback": {"batch_size": batch_size, "on_policy_steps": 1, "max_rounds": 2},
    }


#: The rules that call models (a forced rerun of them, the cache kept, must reach no server).
MODEL_RULES = (
    "ingest",
    "answer",
    "judge",
    "dialogues",
    "upper_bound",
    "feedback_step",
    "feedback_train_dialogues",
    "feedback_train_performance",
)


def workdir(tmp_path: Path) -> Path:
    """A scratch working directory holding the default config (overrides come on top)."""
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    return tmp_path


def snakemake(workdir: Path, *args: str, configfiles=(TINY,), targets=(), timeout: int = 600):
    """Run snakemake on the repository's Snakefile in ``workdir``; fail the test on error.

    ``targets`` come before ``--configfile``, which would otherwise take them for config files.
    """
    command = [
        sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
        str(workdir), "--cores", "2", *targets, "--configfile", *map(str, configfiles), *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result.stdout + result.stderr


def copy_run(finished: Path, target: Path) -> Path:
    """A copy of a finished run's working directory (results, cache, ``.snakemake`` metadata,
    modification times), for a test that reruns or edits it without touching the original."""
    shutil.copytree(finished, target, symlinks=True)
    return target


def planned_outputs(dry_run_log: str) -> list[str]:
    """Output paths of every job a dry run plans."""
    outputs = []
    for block in re.findall(r"output: ([^\n]+)", dry_run_log):
        outputs.extend(part.strip() for part in block.split(","))
    return outputs


def ledgers(workdir: Path, name: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(workdir.glob(f"results/**/{name}"))]
