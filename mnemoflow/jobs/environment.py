"""Jobs of AMemGym environment generation with a model (rules/environment.smk).

One job per user (``generate_user``): sample the personas (seeded, the same in every job), take
the job's one, run the stage chain with its checkpoints, write the user or its failure with the
per-stage report rows. Then ``environment`` gathers the users into the benchmark's ``data.json``
and ``generation_report.parquet``. A benchmark chooses this with ``generate: {method: llm, ...}``;
``method: procedural`` (the default) keeps the procedural ``generate_amemgym`` rule.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.tables import GENERATION_REPORT, write_atomic_text, write_table
from mnemoflow.data.validate import DataError
from mnemoflow.environment.assemble import data_text, validate_data
from mnemoflow.environment.personas import run_personas
from mnemoflow.environment.runner import Failure
from mnemoflow.environment.runner import generate_user as run_user
from mnemoflow.jobs.context import JobEnv, RunKeys, log, write_ledger


@dataclass(frozen=True)
class UserFiles:
    personas: str
    user: str
    ledger: str


def generate_user(
    files: UserFiles, run: RunKeys, env: JobEnv, *, knobs: dict[str, Any], checkpoints: str
) -> None:
    """User ``run.user`` (the persona's index) through the chain -> ``user`` (user or failure).
    ``checkpoints``: the stages' folder, deliberately not an output, so a rerun reuses them."""
    pool = run_personas(files.personas, knobs)
    if not 0 <= run.user < len(pool):
        raise DataError(f"{files.personas}: persona {run.user} asked, {len(pool)} sampled")
    persona = pool[run.user]
    gateway = env.gateway()

    async def generate() -> tuple[Any, list[dict[str, Any]]]:
        async with gateway:
            return await run_user(gateway, persona, knobs, int(knobs["seed"]), checkpoints)

    result, rows = asyncio.run(generate())
    record: dict[str, Any] = {"index": run.user, "persona": str(persona["key"]), "rows": rows}
    if isinstance(result, Failure):
        record["failure"] = {"stage": result.stage, "reason": result.reason}
    else:
        record["user"] = result
    write_atomic_text(files.user, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    write_ledger(
        gateway,
        files.ledger,
        stage="generate_user",
        user=run.user,
        reused=[row["stage"] for row in rows if row["reused"]],
        failed=record.get("failure"),
    )


@dataclass(frozen=True)
class EnvironmentFiles:
    users: list[str]
    data: str
    report: str


def environment(files: EnvironmentFiles, run: RunKeys) -> None:
    """The users' files -> ``data`` (the generated users, validated) and ``report``."""
    records = [json.loads(Path(path).read_text(encoding="utf-8")) for path in files.users]
    records.sort(key=lambda r: r["index"])
    rows = [
        {
            "benchmark": run.benchmark,
            "user": record["index"],
            "persona": record["persona"],
            **{
                name: row[name]
                for name in GENERATION_REPORT.names
                if name in row and name != "user"
            },
        }
        for record in records
        for row in record["rows"]
    ]
    frame = pd.DataFrame(rows, columns=GENERATION_REPORT.names)
    generated = [record["user"] for record in records if "user" in record]
    failed = [record for record in records if "failure" in record]
    for record in failed:
        failure = record["failure"]
        log.warning(
            "user %d (%s) failed at stage %s: %s",
            record["index"],
            record["persona"],
            failure["stage"],
            failure["reason"],
        )
    if not generated:
        raise DataError(
            f"{run.benchmark}: every one of the {len(records)} users failed; see the users' "
            f"files (e.g. {files.users[0] if files.users else '-'})"
        )
    validate_data(generated)
    write_table(frame, files.report, GENERATION_REPORT)
    write_atomic_text(files.data, data_text(generated))
    read_environment(files.data)  # the evaluation's own reader accepts it (cross-field rules)
    log.info("%s: %d users generated, %d failed", run.benchmark, len(generated), len(failed))
