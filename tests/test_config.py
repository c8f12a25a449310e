"""Config errors are caught before any job runs, with messages that name the key."""

import subprocess
import sys

import pytest
import yaml

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import EndpointSpec
from tests.workflow import REPO, workdir


def _dry_run(tmp_path, override):
    wd = workdir(tmp_path)
    path = tmp_path / "override.yaml"
    path.write_text(yaml.safe_dump(override))
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
               str(wd), "--cores", "1", "--dry-run", "--configfile", str(path)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_undefined_system_in_run_list(tmp_path):
    result = _dry_run(tmp_path, {"run": {"benchmarks": ["synthetic"], "systems": ["bm99"]}})
    assert result.returncode != 0
    assert "run.systems: 'bm99' is not defined under systems" in result.stdout + result.stderr


def test_schema_violation_names_the_key(tmp_path):
    result = _dry_run(tmp_path, {"models": {"agent": {"temperature": "hot"}}})
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).splitlines()
    assert "config models.agent.temperature: 'hot' is not of type 'number'" in lines


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"api_key": "sk-secret"}, "put the key in an env var"),
        ({"base_url": "http://x/v1"}, "models.agent.model: required"),
        ({"backend": "openai", "model": "m"}, "models.agent.base_url: required"),
        ({"concurrency": 0}, "models.agent.concurrency: a positive integer"),
        ({"temprature": 0}, "unknown keys ['temprature']"),
    ],
)
def test_endpoint_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        EndpointSpec.from_config("agent", raw)
    assert message in str(info.value)
    assert "sk-secret" not in str(info.value)


def test_unknown_role():
    with pytest.raises(ConfigError, match="unknown roles \\['reader'\\]"):
        Gateway.from_config({"reader": {}})


def test_generate_command_writes_tables(tmp_path):
    from mnemoflow.cli import main
    from mnemoflow.data.tables import read_table

    assert main(["generate", "--out", str(tmp_path), "--users", "2", "--periods", "2"]) == 0
    assert read_table(tmp_path / "questions.parquet", "questions").checkpoint.max() == 1
