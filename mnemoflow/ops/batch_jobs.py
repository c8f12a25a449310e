"""A managed endpoint's ``run_batch`` command as a SLURM job of its own.

``vllm run-batch`` needs the GPU node a served endpoint gets, not the CPU job that collected the
batch: :func:`submit` asks ``sbatch`` for the endpoint's resources (GPUs, CPUs, memory, time
limit, partition, account: :func:`mnemoflow.ops.endpoints.sbatch_options`), the command's output in
``results/logs/endpoints/NAME.run_batch.log``; :func:`wait` polls ``squeue`` until the job has
left the queue (``sacct`` needs a database a cluster may not have). Standard library only.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from mnemoflow.ops.endpoints import LOG_DIR, job_spec, sbatch, sbatch_options, slurm_job_active

#: Seconds between polls of a drain job, doubling up to MAX_POLL_S.
POLL_S = 1.0
MAX_POLL_S = 30.0


def log_path(name: str, logs: Path = LOG_DIR) -> Path:
    return Path(logs) / f"{name}.run_batch.log"


def submit(
    name: str, argv: list[str], spec: dict[str, Any], environ: dict[str, str], logs: Path = LOG_DIR
) -> str:
    """Submit ``argv`` (one batch's command) as a SLURM job with endpoint ``name``'s resources;
    its job id. Raises ``RuntimeError`` with sbatch's own words."""
    log = log_path(name, logs)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} run_batch: {shlex.join(argv)}\n")
    options = sbatch_options(f"mnemoflow-run-batch-{name}", job_spec(spec, environ), log)
    return sbatch([*options, "--wrap", shlex.join(argv)], environ)


def wait(jobid: str, poll_s: float = POLL_S) -> None:
    """Until SLURM job ``jobid`` is neither pending nor running."""
    while slurm_job_active(jobid):
        time.sleep(poll_s)
        poll_s = min(MAX_POLL_S, poll_s * 2)
