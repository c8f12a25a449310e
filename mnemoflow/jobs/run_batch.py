"""A managed endpoint's ``run_batch`` command drained as a SLURM job of its own.

A job that runs inside SLURM and collects a batch for a role bound to a managed endpoint with
``run_batch`` (``vllm run-batch -i {input} -o {output} --model ...``) does not run the command in
its own allocation: it submits it with the endpoint's resources, as a served endpoint's server is
submitted (:mod:`mnemoflow.ops.batch_jobs`), records the SLURM job id in the batch's record
beside the cache *before* it waits, then waits for that job and reads its output file into the
cache like a Batch-API batch's. A job killed while it waits finds the record when it runs again
and waits for the same SLURM job (or reads its output), never submitting it twice. Outside SLURM,
or for an external endpoint's ``run_batch``, the command runs in the job
(:func:`mnemoflow.llm.batch_mode.command_argv`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mnemoflow.llm.batch_mode import DrainCommand, Save, command_argv
from mnemoflow.llm.endpoints import check_endpoints, is_managed
from mnemoflow.llm.types import EndpointError, EndpointSpec
from mnemoflow.ops import batch_jobs


def slurm_drain(
    endpoints: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> DrainCommand | None:
    """Drains a managed endpoint's batches as SLURM jobs, when this job runs inside SLURM."""
    environ = dict(os.environ if environ is None else environ)
    if "SLURM_JOB_ID" not in environ:
        return None
    managed = {
        name: spec
        for name, spec in check_endpoints(endpoints).items()
        if is_managed(spec) and spec.get("run_batch")
    }

    async def drain(spec: EndpointSpec, record: dict[str, Any], save: Save) -> bytes | None:
        resources = managed.get(spec.endpoint or "")
        if resources is None or not spec.run_batch:
            return None  # not a managed endpoint's command: it runs in the job
        name = str(spec.endpoint)
        output = Path(record["output"])
        jobid = record.get("slurm_job")
        if jobid is None:
            output.unlink(missing_ok=True)  # a failed drain's partial output is not this one's
            argv = command_argv(spec.run_batch, record)
            try:
                jobid = await asyncio.to_thread(batch_jobs.submit, name, argv, resources, environ)
            except RuntimeError as exc:
                raise EndpointError(f"endpoint {name} (run_batch): {exc}") from None
            record["slurm_job"] = jobid
            save(record)  # before waiting: a rerun waits for this job, never submits again
        await asyncio.to_thread(batch_jobs.wait, jobid)
        if not output.is_file():
            del record["slurm_job"]  # a rerun submits it again
            save(record)
            raise EndpointError(
                f"models.{spec.role}: endpoint {name}'s run_batch SLURM job {jobid} ended "
                f"without an output file; its log: {batch_jobs.log_path(name)}"
            )
        record["final_status"] = "completed"
        return output.read_bytes()

    return drain
