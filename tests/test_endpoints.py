"""Named endpoints (config ``endpoints:``): external ones resolved when the config is read,
managed ones started, used and stopped by the workflow itself (``mnemoflow.ops.endpoints``).

The workflow tests run the repository's Snakefile with the agent and judge bound to a managed
endpoint whose ``serve`` command is the project's OpenAI-compatible test server: the first run's
server is killed while the answer job calls it (the job fails in one line naming the endpoint and
its log), the rerun starts it again, resumes from the cache, and stops it when the run ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from mnemoflow.config_schema import check_config
from mnemoflow.errors import ConfigError
from mnemoflow.jobs.context import JobEnv
from mnemoflow.llm.endpoints import bind_endpoints, check_endpoints
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.limits import endpoint_budgets
from mnemoflow.llm.types import ChatRequest, check_bindings, played_by
from mnemoflow.ops import endpoints as ops
from tests.workflow import REPO, SMALL_SYNTHETIC, TINY, ledgers, workdir

SCHEMA = REPO / "schemas" / "config.schema.yaml"
SERVE = f"{sys.executable} -m mnemoflow.testing.openai_server --port {{port}}"


def _config(**extra):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(extra)
    return config


def test_a_role_bound_to_an_unknown_endpoint_is_one_line_naming_it():
    with pytest.raises(
        ConfigError,
        match=r"^config models.agent.endpoint: 'gpu' is not defined "
        r"under endpoints \(defined: \['vllm'\]\)$",
    ):
        bind_endpoints(
            {"agent": {"endpoint": "gpu", "model": "m"}},
            {"vllm": {"base_url": "http://h:8000/v1"}},
        )


def test_the_workflow_refuses_an_unknown_endpoint_before_any_job(tmp_path):
    wd = workdir(tmp_path)
    override = {"models": {"agent": {"endpoint": "gpu", "model": "m"}}}
    (wd / "override.yaml").write_text(yaml.safe_dump(override))
    command = [
        sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(wd),
        "--cores", "1", "--dry-run", "--configfile", str(wd / "override.yaml"),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).splitlines()
    assert any(
        line.endswith("config models.agent.endpoint: 'gpu' is not defined under endpoints "
                      "(defined: [])")
        for line in lines
    ), result.stderr[-2000:]  # fmt: skip


def test_base_url_and_endpoint_together_are_refused():
    with pytest.raises(ConfigError, match=r"^config models.judge: both endpoint and base_url"):
        bind_endpoints(
            {"judge": {"endpoint": "vllm", "base_url": "http://x/v1", "model": "m"}},
            {"vllm": {"base_url": "http://h:8000/v1"}},
        )


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"serve": "vllm serve m"}, r"endpoints.q.serve: a command with \{port\}"),
        ({"serve": "x {port}", "base_url": "http://h/v1"}, r"endpoints.q: both serve and base_url"),
        ({"model": "m"}, r"endpoints.q: needs base_url .*, serve .* or backend: offline"),
        ({"backend": "openai"}, r"endpoints.q.backend: only offline"),
        ({"backend": "offline", "model": "m"}, r"endpoints.q: unknown keys \[.model.\]"),
        ({"serve": "x {port}", "gpu": 1}, r"endpoints.q: unknown keys \['gpu'\]"),
        ({"serve": "x {port}", "ready_timeout_s": 0}, r"endpoints.q.ready_timeout_s: a positive"),
        ({"serve": "x {port}", "gpus": 0.5}, r"endpoints.q.gpus: an integer >= 0"),
    ],
)
def test_a_bad_endpoint_is_one_line_naming_its_key(spec, error):
    with pytest.raises(ConfigError, match=error):
        check_endpoints({"q": spec})


def test_the_schema_names_the_endpoints_key():
    config = _config(endpoints={"q": {"serve": "x {port}", "gpus": "one"}})
    with pytest.raises(ConfigError, match=r"^config endpoints.q.gpus: 'one' is not of type"):
        check_config(config, SCHEMA)
    check_config(_config(endpoints={"q": {"serve": "x {port}", "gpus": 1}}), SCHEMA)


def test_an_external_endpoint_is_resolved_when_the_config_is_read(monkeypatch):
    endpoints = {"site": {"base_url": "https://api.example.org/v1", "api_key_env": "SITE_KEY"}}
    models = bind_endpoints(
        {"agent": {"endpoint": "site", "model": "gpt-4o-mini"}, "judge": {"backend": "offline"}},
        endpoints,
    )
    assert models["agent"]["base_url"] == "https://api.example.org/v1"
    assert models["agent"]["api_key_env"] == "SITE_KEY"
    assert models["agent"]["backend"] == "openai"
    with pytest.raises(
        ConfigError,
        match=r"^config endpoints.site.api_key_env: environment variable SITE_KEY is not set "
        r"\(models.agent binds it\)$",
    ):
        check_bindings(models, environ={})
    check_bindings(models, environ={"SITE_KEY": "k"}, used=["agent"], allow_offline=["judge"])
    assert played_by(models, ["agent", "judge"]) == {
        "agent": {
            "backend": "openai",
            "model": "gpt-4o-mini",
            "endpoint": "site",
            "host": "api.example.org",
        },
        "judge": {"backend": "offline", "model": "offline-heuristic"},
    }
    # the cache key is the model's, not the address's: the same request bound by base_url
    monkeypatch.setenv("SITE_KEY", "k")
    direct = {"agent": {"base_url": "http://elsewhere:1/v1", "model": "gpt-4o-mini"}}
    request = ChatRequest(role="agent", task="t", messages=[{"role": "user", "content": "hi"}])
    assert Gateway.from_config(models).request_key(request) == Gateway.from_config(
        direct
    ).request_key(request)


def test_a_managed_endpoint_is_symbolic_until_a_job_runs():
    models = bind_endpoints(
        {"agent": {"endpoint": "q", "model": "m"}, "judge": {"endpoint": "q", "model": "m"}},
        {"q": {"serve": "vllm serve m --port {port}", "gpus": 1}},
    )
    assert models["agent"]["base_url"] == "endpoint://q"
    assert endpoint_budgets(models) == {"endpoint_q": 8}  # one run-wide budget, port-free
    gateway = Gateway.from_config(models)
    request = ChatRequest(role="agent", task="t", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigError, match=r"'q' is a managed endpoint and this job was given no"):
        gateway.backend("agent")
    assert gateway.describe()["agent"]["base_url"] == "endpoint://q"
    assert gateway.request_key(request)


def test_a_run_batch_endpoint_has_a_servers_resources_and_binds_batch_roles_only():
    command = "vllm run-batch -i {input} -o {output} --model m"
    endpoints = {"v": {"run_batch": command, "gpus": 1}}
    spec = check_endpoints(endpoints)["v"]
    assert (spec["gpus"], spec["cpus"], spec["time_limit_min"]) == (1, 1, 720)
    judge = {"endpoint": "v", "model": "m", "batch": True}
    bound = bind_endpoints({"judge": judge}, endpoints)["judge"]
    assert (bound["base_url"], bound["run_batch"]) == ("endpoint://v", command)
    with pytest.raises(ConfigError, match=r"^config models.agent: endpoint 'v' runs no server"):
        bind_endpoints({"agent": {"endpoint": "v", "model": "m"}}, endpoints)
    with pytest.raises(ConfigError, match=r"without batch_fallback: online$"):
        bind_endpoints({"judge": {**judge, "batch_fallback": "online"}}, endpoints)
    with pytest.raises(ConfigError, match=r"^config endpoints.v.run_batch: a command with"):
        check_endpoints({"v": {"run_batch": "vllm run-batch --model m"}})
    # a job whose role only goes through run_batch starts no server, even where one is named
    served = {"v": {**endpoints["v"], "serve": "vllm serve m --port {port}"}}
    env = JobEnv(models=bind_endpoints({"judge": judge}, served), endpoints=served)
    assert env.managed_addresses() == ({}, [])


def test_the_sbatch_command_asks_for_the_endpoints_resources(tmp_path):
    spec = check_endpoints(
        {
            "q": {
                "serve": "vllm serve m --port {port}",
                "gpus": 2,
                "cpus": 8,
                "mem_mb": 64000,
                "time_limit_min": 90,
                "slurm_partition": "gpu",
            }
        }
    )["q"]
    command = ops.sbatch_command("q", spec, tmp_path / "ep", tmp_path / "logs")
    assert command[0] == "sbatch"
    for flag in (
        "--gres=gpu:2",
        "--cpus-per-task=8",
        "--mem=64000",
        "--time=90",
        "--partition=gpu",
        f"--output={tmp_path / 'logs' / 'q.log'}",
    ):
        assert flag in command, flag
    assert "mnemoflow.ops.endpoints supervise q" in command[-1]


def _wait_for(name: str, what: str, root: Path, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = ops.read_state(name, root) or {}
        if state.get("state") == what:
            return state
        time.sleep(0.1)
    raise AssertionError(f"endpoint {name} not {what} within {timeout}s: {state}")


@pytest.mark.slow
def test_jobs_share_a_server_that_stops_when_idle_or_at_its_time_limit(tmp_path, monkeypatch):
    """Without the workflow: two jobs' leases on one server; it stops once both let go (idle
    timeout), a server past its time limit stops while leased, and the next job starts it again."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    root = tmp_path / ops.STATE_DIR
    spec = check_endpoints({"t": {"serve": SERVE, "idle_timeout_s": 1, "ready_timeout_s": 30}})
    first = ops.ensure("t", spec["t"])
    second = ops.ensure("t", spec["t"])
    assert first.url == second.url and ops.answers(first.url)
    assert first.down() is None
    first.release()
    time.sleep(2.0)  # past the idle timeout: the second job still holds it
    assert ops.read_state("t", root)["state"] == "ready"
    second.release()
    state = _wait_for("t", "stopped", root)
    assert state["reason"] == "idle for 1s" and not ops.answers(first.url, timeout=1)
    assert (tmp_path / "results/logs/endpoints/t.log").exists()

    limited = {**spec["t"], "idle_timeout_s": 300, "time_limit_min": 0.05}  # 3 s
    third = ops.ensure("t", limited)
    state = _wait_for("t", "stopped", root)
    assert state["reason"] == "time limit"
    assert third.down().startswith("endpoint t (managed) is not running (stopped: time limit)")
    third.release()


# --- the workflow starts, uses and stops a managed endpoint -------------------------------------

OVERRIDE = {
    **SMALL_SYNTHETIC,
    "endpoints": {"testserver": {"serve": SERVE, "ready_timeout_s": 60, "idle_timeout_s": 120}},
    "models": {
        role: {
            "endpoint": "testserver",
            "model": "mnemoflow-test",
            "concurrency": 1,
            "max_retries": 1,
            "timeout": 10,
            "max_parse_retries": 0,
        }
        for role in ("agent", "judge")
    },
    "allow_offline_roles": ["user", "memory_writer", "embedder", "generator_high", "generator_low"],
}


def _start(wd: Path, *args: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(wd),
        "--cores",
        "2",
        "--configfile",
        str(TINY),
        str(wd / "override.yaml"),
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"snakemake ran over {timeout}s: {out[-3000:]}")
    return process.returncode, out


def _stats(state: dict) -> dict:
    url = f"http://127.0.0.1:{state['port']}/mnemoflow/stats"
    with urllib.request.urlopen(url, timeout=2) as reply:
        return json.loads(reply.read())


@pytest.mark.slow
def test_the_workflow_starts_uses_and_stops_a_managed_endpoint(tmp_path):
    wd = workdir(tmp_path)
    override = json.loads(json.dumps(OVERRIDE))
    # the first run's server answers slowly, so it is still being called when it is killed
    override["endpoints"]["testserver"]["serve"] = SERVE + " --latency 0.4"
    (wd / "override.yaml").write_text(yaml.safe_dump(override))
    state_file = wd / "results/endpoints/testserver.json"

    # 1. the server dies while the answer job calls it: the job fails in one line
    began = time.monotonic()
    run = _start(wd)
    deadline = began + 120
    killed = None
    while time.monotonic() < deadline and run.poll() is None:
        state = ops.read_state("testserver", wd / "results/endpoints") or {}
        if state.get("state") == "ready":
            try:
                answered = sum(_stats(state)["answered"].values())
            except OSError:
                answered = 0
            if answered >= 3:
                killed = state
                os.killpg(state["server_pgid"], signal.SIGKILL)
                break
        time.sleep(0.1)
    code, out = _finish(run)
    print(f"first run (server killed) {time.monotonic() - began:.1f}s")
    assert killed, f"the managed server never answered thrice: {out[-3000:]}"
    assert code != 0
    log = wd / "results/logs/synthetic/none/qa/step0/shard0/answer.log"
    line = (
        "endpoint testserver (managed) is not running (died: the server exited with status -9); "
        "its log: results/logs/endpoints/testserver.log; a rerun starts it again"
    )
    assert line in log.read_text(), log.read_text()[-2000:]
    assert (wd / "results/logs/endpoints/testserver.log").exists()
    assert json.loads(state_file.read_text())["state"] == "died"

    # 2. the rerun starts it again, resumes from the cache, and stops it at the end
    override["endpoints"]["testserver"]["serve"] = SERVE
    (wd / "override.yaml").write_text(yaml.safe_dump(override))
    rerun = time.monotonic()
    code, out = _finish(_start(wd))
    print(f"rerun {time.monotonic() - rerun:.1f}s")
    assert code == 0, out[-3000:]
    state = json.loads(state_file.read_text())
    assert state["state"] == "stopped" and state["reason"] == "the workflow ended", state
    assert state["pid"] != killed["pid"]
    assert not ops.answers(f"http://127.0.0.1:{state['port']}/v1", timeout=1)
    assert not list((wd / "results/endpoints/testserver.leases").iterdir())  # every job let go

    answers = ledgers(wd, "answers.ledger.json")[0]
    totals = answers["totals"]
    assert totals["calls"] == 8 and totals["errors"] == 0
    assert totals["cache_hits"] >= 2  # what the killed server had answered
    assert answers["roles"]["agent"]["endpoint"] == "testserver"
    assert answers["roles"]["agent"]["base_url"] == "endpoint://testserver"
    judged = ledgers(wd, "judgements.ledger.json")[0]["totals"]
    assert judged["calls"] >= 8 and judged["errors"] == 0
    summary = (wd / "results/summary.md").read_text()
    assert "| agent | openai | mnemoflow-test | testserver |" in summary


def test_score_reads_a_judge_bound_by_endpoint_name(tmp_path, monkeypatch):
    """`mnemoflow score --judge-config` resolves `models.judge.endpoint` as the workflow does."""
    from mnemoflow.commands.score import _config

    config = tmp_path / "judge.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "endpoints": {"site": {"base_url": "http://judge:8000/v1", "api_key_env": "K"}},
                "models": {"judge": {"endpoint": "site", "model": "gpt-4o-mini"}},
            }
        )
    )
    models, _ = _config(config)
    assert models["judge"]["base_url"] == "http://judge:8000/v1"
    assert models["judge"]["api_key_env"] == "K"
