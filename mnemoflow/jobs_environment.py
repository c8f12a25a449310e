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
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.amemgym_procedural import PERSONAS
from mnemoflow.data.tables import GENERATION_REPORT, write_atomic_text, write_table
from mnemoflow.data.validate import DataError
from mnemoflow.environment import knobs as knobs_
from mnemoflow.environment.assemble import data_text, validate_data
from mnemoflow.environment.runner import Failure
from mnemoflow.environment.runner import generate_user as run_user
from mnemoflow.jobs import _gateway, _write_ledger

log = logging.getLogger("mnemoflow")

#: The roles a generation job calls.
ROLES = ("generator_high", "generator_low")


def resolve_generate(config: dict[str, Any]) -> None:
    """Store every LLM benchmark's ``generate:`` in full (preset values + overrides), so the
    workflow's readers (steps, schedule, job params) all see one set of knobs; checks each."""
    for name, spec in (config.get("benchmarks") or {}).items():
        if knobs_.method_of(spec) == "llm":
            spec["generate"] = knobs_.settings(spec["generate"], name)


def generated_with(config: dict[str, Any], method: str) -> list[str]:
    """Names of the benchmarks whose environment ``method`` makes (``llm`` / ``procedural``)."""
    return [
        name
        for name, spec in (config.get("benchmarks") or {}).items()
        if knobs_.method_of(spec) == method
    ]


def personas_file(generate: dict[str, Any]) -> str:
    """The persona source: ``personas.path`` (a Nemotron-Personas parquet, say), else the pool
    shipped in ``data/``."""
    return str((generate.get("personas") or {}).get("path") or PERSONAS)


def sample(personas: str, knobs: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's personas, the same list in every job (seeded by the ``seed`` knob)."""
    from mnemoflow.environment.personas import sample_personas

    shipped = Path(personas).resolve() == PERSONAS.resolve()
    return sample_personas(
        None if shipped else personas,
        knobs["num_user_profiles"],
        knobs["seed"],
        list(knobs["exclude_ids"]),
    )


def generate_user(
    *,
    personas: str,
    user: int,
    out: str,
    ledger: str,
    checkpoints: str,
    knobs: dict[str, Any],
    models: dict[str, Any],
    cache: str | None,
    limits: dict[str, Any] | None = None,
) -> None:
    """User ``user`` (the persona's index) through the chain -> ``out`` (user or failure)."""
    pool = sample(personas, knobs)
    if not 0 <= user < len(pool):
        raise DataError(f"{personas}: persona {user} asked, {len(pool)} sampled")
    persona = pool[user]
    gateway = _gateway(models, cache, limits, only_given=True)

    async def run() -> tuple[Any, list[dict[str, Any]]]:
        try:
            return await run_user(gateway, persona, knobs, int(knobs["seed"]), checkpoints)
        finally:
            await gateway.aclose()

    result, rows = asyncio.run(run())
    record: dict[str, Any] = {"index": user, "persona": str(persona["key"]), "rows": rows}
    if isinstance(result, Failure):
        record["failure"] = {"stage": result.stage, "reason": result.reason}
    else:
        record["user"] = result
    write_atomic_text(out, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    _write_ledger(
        gateway,
        ledger,
        stage="generate_user",
        user=user,
        reused=[row["stage"] for row in rows if row["reused"]],
        failed=record.get("failure"),
    )


def environment(*, users: list[str], benchmark: str, data: str, report: str) -> None:
    """The users' files -> ``data`` (the generated users, validated) and ``report``."""
    records = [json.loads(Path(path).read_text(encoding="utf-8")) for path in users]
    records.sort(key=lambda r: r["index"])
    rows = [
        {
            "benchmark": benchmark,
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
            f"{benchmark}: every one of the {len(records)} users failed; see the users' files "
            f"(e.g. {users[0] if users else '-'})"
        )
    validate_data(generated)
    write_table(frame, report, GENERATION_REPORT)
    write_atomic_text(data, data_text(generated))
    read_environment(data)  # the evaluation's own reader accepts it (cross-field rules)
    log.info("%s: %d users generated, %d failed", benchmark, len(generated), len(failed))
