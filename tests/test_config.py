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


REMOTE = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def test_a_role_the_run_uses_may_not_run_offline_beside_real_models():
    from mnemoflow.llm.types import check_bindings

    models = {"agent": REMOTE, "judge": {}, "embedder": {"backend": "sentence_transformers"}}
    with pytest.raises(ConfigError) as info:
        check_bindings(models, used={"agent", "judge", "user", "embedder"})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("config allow_offline_roles: roles ['judge', 'user']")
    assert "['agent']" in message  # the roles that call real models; a local embedder is neither
    check_bindings(models, used={"agent", "judge", "user"}, allow_offline=["judge", "user"])
    check_bindings(models, used={"agent", "embedder"})  # unused offline roles do not count
    check_bindings({"agent": {}, "judge": {}}, used={"agent", "judge"})  # all offline: valid
    check_bindings({"agent": {}, "judge": REMOTE}, used={"agent"})  # the real one is not used
    # an unbound critic takes the judge's binding (ROLE_DEFAULTS): remote with it, not offline
    check_bindings({"judge": REMOTE}, used={"judge", "critic"})
    with pytest.raises(ConfigError, match="allow_offline_roles: unknown roles \\['reader'\\]"):
        check_bindings({}, allow_offline=["reader"])


def test_the_workflow_refuses_a_silent_offline_role_unless_allowed(tmp_path):
    """The default run uses every conversational role; binding only the agent refuses the run
    in one line naming the offline roles and the key; naming them in allow_offline_roles runs."""
    (tmp_path / "refused").mkdir()
    (tmp_path / "allowed").mkdir()
    result = _dry_run(tmp_path / "refused", {"models": {"agent": REMOTE}})
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "config " in line]
    assert any(
        line.endswith(
            "config allow_offline_roles: roles ['judge', 'user', 'memory_writer', "
            "'generator_high', 'generator_low'] would run the offline heuristic while ['agent'] "
            "call real models; bind them under models: or name them in allow_offline_roles"
        )
        for line in lines
    ), lines
    # static QA alone uses agent, judge, memory_writer and embedder (a local model: not offline)
    static = {
        "models": {"agent": REMOTE},
        "run": {"benchmarks": ["synthetic"], "systems": ["none"]},
    }
    result = _dry_run(tmp_path / "allowed", {**static, "allow_offline_roles": ["judge"]})
    assert result.returncode != 0
    assert "config allow_offline_roles: roles ['memory_writer'] would run" in result.stdout
    allowed = {**static, "allow_offline_roles": ["judge", "memory_writer"]}
    result = _dry_run(tmp_path / "allowed", allowed)
    assert result.returncode == 0, result.stdout[-2000:]


def test_every_interactive_benchmark_of_the_default_config_runs_the_memoryless_control():
    """`none` beside the memory systems: accuracy without memory is the baseline a reader needs
    where the memory score is not meaningful (upper bound about random)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    interactive = {
        name: spec
        for name, spec in config["benchmarks"].items()
        if "interactive" in spec.get("protocols", [])
    }
    assert {"amemgym_procedural", "amemgym_generated"} <= set(interactive)
    for name, spec in interactive.items():
        assert "none" in spec.get("systems", config["run"]["systems"]), name
