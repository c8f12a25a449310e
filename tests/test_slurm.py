"""The SLURM path, tested for real: a one-node cluster on this machine runs a workflow through
``snakemake --executor slurm`` (profile ``profiles/slurm-local``), and its outputs must equal a
local run's.

The Debian packages are installed when missing (``apt-get``, as root); the test skips only when
that is impossible. Every Snakemake run is bounded by a timeout and killed by PID when it
overruns, because Snakemake can wait forever on a status command that never answers.
"""

from __future__ import annotations

import importlib.util
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

from mnemoflow import cluster
from mnemoflow.daemon import Daemon, is_running
from tests.system_packages import apt_install

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "profiles" / "slurm-local"
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


@pytest.fixture(scope="module")
def local_cluster():
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.fail("snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'")
    reason = apt_install(["slurm-wlm", "munge"], cluster.missing_programs)
    if reason:
        pytest.skip(reason)
    state = cluster.up(timeout=90)
    print(f"\ncluster up in {state.get('seconds_to_idle', 0.0)}s")
    try:
        yield state
    finally:
        stopped = cluster.down()
        started = {d["name"] for d in state["daemons"]}
        assert set(stopped) == started, f"stopped {stopped}, started {sorted(started)}"
        for daemon in state["daemons"]:
            assert not is_running(Daemon(**daemon)), daemon


def _snakemake(args: list[str], workdir: Path, timeout: float = RUN_TIMEOUT_S) -> float:
    """Run Snakemake in its own process group; kill that group by PID if it overruns."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("SLURM_CONF", None)
    command = [sys.executable, "-m", "snakemake", "--directory", str(workdir), *args]
    log = workdir.parent / f"{workdir.name}.log"
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
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
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(FIXTURE_SNAKEFILE)
    on_slurm, local = tmp_path / "slurm", tmp_path / "local"
    on_slurm.mkdir()
    local.mkdir()
    slurm_s = _snakemake(["-s", str(snakefile), "--workflow-profile", str(PROFILE)], on_slurm)
    local_s = _snakemake(["-s", str(snakefile), "--cores", "2"], local)
    print(f"fixture: slurm {slurm_s:.1f}s, local {local_s:.1f}s")

    assert len(_slurm_job_ids(on_slurm)) == 3  # shard 0, shard 1, summarize: all via sbatch
    via_slurm = pd.read_parquet(on_slurm / "results/summary.parquet")
    here = pd.read_parquet(local / "results/summary.parquet")
    assert via_slurm["in_slurm_job"].all() and not here["in_slurm_job"].any()
    assert sorted(via_slurm["shard"].unique()) == [0, 1]
    # 2 users x 3 periods x 3 sessions per shard, 6 turns each (the synthetic defaults)
    assert len(via_slurm) == 2 * 18 and set(via_slurm["turns"]) == {6}
    columns = [c for c in here.columns if c != "in_slurm_job"]
    pd.testing.assert_frame_equal(via_slurm[columns], here[columns])


def test_tiny_config_on_slurm_equals_local(local_cluster, tmp_path):
    """The project's workflow with tests/configs/tiny.yaml, on the cluster and locally."""
    if not (ROOT / "Snakefile").exists():
        pytest.skip("workflow not present")
    config = ROOT / "tests" / "configs" / "tiny.yaml"
    common = ["-s", str(ROOT / "Snakefile"), "--configfile", str(config)]
    on_slurm, local = tmp_path / "slurm", tmp_path / "local"
    for workdir in (on_slurm, local):
        workdir.mkdir()
        # the Snakefile's `configfile: "config.yaml"` is read from the working directory
        shutil.copy(ROOT / "config.yaml", workdir / "config.yaml")
    slurm_s = _snakemake([*common, "--workflow-profile", str(PROFILE)], on_slurm)
    local_s = _snakemake([*common, "--cores", "2"], local)
    print(f"tiny config: slurm {slurm_s:.1f}s, local {local_s:.1f}s")

    assert _slurm_job_ids(on_slurm), "no job went through sbatch"
    via_slurm = pd.read_parquet(on_slurm / "results/summary.parquet")
    here = pd.read_parquet(local / "results/summary.parquet")
    assert len(here) > 0
    pd.testing.assert_frame_equal(via_slurm, here)
