"""The conda environment file pins what pyproject.toml pins, so both ways to run agree."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_conda_env_pins_every_dependency_of_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "envs" / "mnemoflow.yaml").read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    packages = [line for line in pip if not line.startswith("-")]
    assert sorted(packages) == sorted(project["dependencies"])
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert project["requires-python"] == f">={python.split('=')[1]}"
    # Snakemake copies the env file into .snakemake/conda/, so a relative path would point there.
    assert not any(line.startswith("-e") for line in pip)
