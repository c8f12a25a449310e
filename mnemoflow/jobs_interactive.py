"""Jobs of the interactive protocol (AMemGym): generate, dialogues / replay, upper bound, score.

Like :mod:`mnemoflow.jobs`, one function per rule: read the inputs, call the protocol, write the
outputs atomically with the gateway's ledger beside them. The small ``*_of`` helpers read a
benchmark's config entry for the workflow's input / params functions (rules/common.smk).

A benchmark runs these protocols with ``protocols: [interactive]`` (on-policy) and / or
``interactive_replay`` (off-policy); its ``interactive:`` entry holds ``num_rounds_init`` (1),
``num_rounds_update`` (2), ``off_policy_source`` (the system whose on-policy transcripts
``interactive_replay`` memorizes) and ``reference_upper_bound`` (false).
``generate: {users, periods, seed}`` makes the environment with the ``generate_amemgym`` rule
instead of reading ``source.path``; ``generate: {method: llm, ...}`` with the model-driven chain
(mnemoflow/jobs_environment.py), whose preset's ``num_rounds_*`` are the schedule's defaults.
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from mnemoflow.agents.self_evolution import EVOLUTION
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.tables import DIAGNOSIS, SCORES, read_table, write_table
from mnemoflow.errors import ConfigError
from mnemoflow.jobs import _gateway, _tick, _write_ledger
from mnemoflow.progress import progress
from mnemoflow.protocols import interactive
from mnemoflow.protocols.static_qa import shard_episodes

log = logging.getLogger("mnemoflow")

INTERACTIVE_KEYS = {
    "num_rounds_init",
    "num_rounds_update",
    "off_policy_source",
    "reference_upper_bound",
}


def is_interactive(spec: dict[str, Any]) -> bool:
    return any(p in interactive.PROTOCOLS for p in spec.get("protocols", []))


def _options(spec: dict[str, Any]) -> dict[str, Any]:
    options = dict(spec.get("interactive") or {})
    unknown = sorted(set(options) - INTERACTIVE_KEYS)
    if unknown:
        raise ConfigError(
            f"config benchmarks.*.interactive: unknown keys {unknown}; known: "
            f"{sorted(INTERACTIVE_KEYS)}"
        )
    return options


def replay_source(spec: dict[str, Any]) -> str:
    """The system whose ``interactive`` transcripts the ``interactive_replay`` protocol replays."""
    source = _options(spec).get("off_policy_source")
    if not source:
        raise ConfigError(
            "config benchmarks.*.interactive.off_policy_source: required by the "
            "interactive_replay protocol (the system whose transcripts are replayed)"
        )
    return str(source)


def schedule_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The loop's knobs as a plain dict (a job param, so a change re-runs the dialogues)."""
    options = _options(spec)
    generate = spec.get("generate") or {}
    if generate.get("method") == "llm":  # the preset's rounds unless interactive: sets them
        options = {
            "num_rounds_init": generate.get("num_rounds_init", 1),
            "num_rounds_update": generate.get("num_rounds_update", 2),
            **options,
        }
    return {
        "num_rounds_init": int(options.get("num_rounds_init", 1)),
        "num_rounds_update": int(options.get("num_rounds_update", 2)),
        "option_seed": spec.get("seed", 0),
        "shuffle_options": bool(spec.get("shuffle_options", True)),
    }


def generate_environment(
    *, out: str, users: int, periods: int, seed: int, method: str = "procedural"
) -> None:
    """Write a procedural environment (mnemoflow.data.amemgym_procedural) as ``out``."""
    from mnemoflow.data import amemgym_procedural

    if Path(out).name != "data.json":
        raise ValueError(f"generate_amemgym: the output must be named data.json, got {out}")
    data = amemgym_procedural.generate({"users": users, "periods": periods, "seed": seed})
    amemgym_procedural.write_data(data, Path(out).parent)
    log.info("generated %d users with %d update periods (seed %d)", users, periods, seed)


def dialogues(
    *,
    environment: str,
    previous: str | None,
    source: str | None,
    benchmark: str,
    system_name: str,
    protocol: str,
    step: int,
    shard: int,
    cache: str | None,
    dialogues: str,
    snapshot: str,
    replies: str,
    recall: str,
    ledger: str,
    system: dict[str, Any],
    n_shards: int,
    schedule: dict[str, Any],
    models: dict[str, Any],
    seed: int,
    limits: dict[str, Any] | None = None,
    evolution: str | None = None,
) -> None:
    """Converse (or replay) period ``step`` of this shard's users from snapshot ``step-1``;
    ``evolution``: the self-evolution records (empty unless the system sets ``evolve``)."""
    users = read_environment(environment)
    mine = set(shard_episodes([u.id for u in users], shard, n_shards))
    users = [u for u in users if u.id in mine]
    source_rows = None
    if source:
        source_rows = read_table(source, "dialogues")
        source_rows = source_rows[source_rows.step == step].reset_index(drop=True)
    gateway = _gateway(models, cache, limits)
    keys = {"benchmark": benchmark, "system": system_name, "protocol": protocol, "step": step}

    async def run() -> interactive.StepResult:
        with progress(len(users), f"{protocol} {benchmark}/{system_name} step {step}") as bar:
            try:
                return await interactive.run_step(
                    users,
                    step,
                    system,
                    keys,
                    Path(previous) if previous else None,
                    Path(snapshot),
                    gateway,
                    interactive.Schedule(**schedule),
                    seed=seed,
                    source=source_rows,
                    source_name=str(source),
                    progress=_tick(bar),
                )
            finally:
                await gateway.aclose()

    result = asyncio.run(run())
    write_table(result.dialogues, dialogues, "dialogues")
    write_table(result.replies, replies, interactive.CHECKPOINT_REPLIES)
    write_table(result.recall, recall, interactive.RECALL_REPLIES)
    if evolution:
        write_table(result.evolution, evolution, EVOLUTION)
    failures = int((~result.replies.parse_ok.astype(bool)).sum())
    _write_ledger(
        gateway,
        ledger,
        stage=protocol,
        users=len(users),
        turns=len(result.dialogues),
        checkpoint_parse_failures=failures,
        evolution_parse_failures=int((~result.evolution.parse_ok.astype(bool)).sum()),
    )
    log.info("%s step %d: %d users, %d turns", protocol, step, len(users), len(result.dialogues))


def upper_bound(
    *,
    environment: str,
    replies: str,
    ledger: str,
    cache: str | None,
    schedule: dict[str, Any],
    models: dict[str, Any],
    limits: dict[str, Any] | None = None,
) -> None:
    """The agent's model given each option's state, no memory: once per benchmark."""
    users = read_environment(environment)
    gateway = _gateway(models, cache, limits)
    total = sum(len(q.choices) for u in users for q in u.questions)

    async def run() -> pd.DataFrame:
        with progress(total, "upper bound") as bar:
            try:
                return await interactive.upper_bound(
                    users, gateway, interactive.Schedule(**schedule), progress=_tick(bar)
                )
            finally:
                await gateway.aclose()

    frame = asyncio.run(run())
    write_table(frame, replies, interactive.UPPER_BOUND_REPLIES)
    _write_ledger(gateway, ledger, stage="upper_bound", replies=len(frame))


def _concat(paths: list[str], schema: pa.Schema) -> pd.DataFrame:
    frames = [read_table(path, schema) for path in paths]
    return pd.concat(frames, ignore_index=True) if frames else schema.empty_table().to_pandas()


def _write_any(frame: pd.DataFrame, path: str) -> None:
    """Write a table whose columns the scorer owns (schema taken from the frame)."""
    write_table(frame, path, pa.Schema.from_pandas(frame, preserve_index=False))


def score(
    *,
    environment: str,
    replies: list[str],
    recall: list[str],
    upper: str,
    benchmark: str,
    system_name: str,
    protocol: str,
    step: int,
    scores: str,
    question_scores: str,
    diagnosis: str,
    period_scores: str,
    reference_upper_bound: bool,
    evolution: list[str] = (),
) -> None:
    """Step k's scores from the replies of periods 0..k (``score_replies`` of
    ``mnemoflow.eval.amemgym_score``): period k's values, and the mean over periods 0..k (at the
    last step, the reference's reported number). The diagnosis of period k needs the recall at
    the checkpoints where each info type last changed, hence the earlier periods."""
    from mnemoflow.eval.amemgym_score import score_replies

    users = read_environment(environment)
    checkpoint = _concat(replies, interactive.CHECKPOINT_REPLIES)
    recalled = _concat(recall, interactive.RECALL_REPLIES)
    bound = read_table(upper, interactive.UPPER_BOUND_REPLIES)
    columns = interactive.SCORER_COLUMNS
    per_question, per_period = score_replies(
        users,
        checkpoint[columns["replies"]],
        bound[columns["upper"]],
        recalled[columns["recall"]],
        reference_upper_bound=reference_upper_bound,
    )
    keys = {"benchmark": benchmark, "system": system_name, "protocol": protocol, "step": step}
    counts = checkpoint.groupby("period").size().to_dict()
    if "period" in per_question.columns:
        per_question = per_question[per_question["period"] == step]
    _write_any(per_question.reset_index(drop=True), question_scores)
    _write_any(per_period, period_scores)
    rows = summary_rows(per_period, keys, counts)
    evolved = evolution_rows(_concat(list(evolution), EVOLUTION), keys)
    if len(evolved):
        rows = pd.concat([rows, evolved], ignore_index=True)
    write_table(rows, scores, SCORES)
    write_table(diagnosis_rows(per_period, keys, counts), diagnosis, DIAGNOSIS)
    log.info("scored %d checkpoint replies of %s/%s", len(checkpoint), system_name, protocol)


#: Aggregate names of the summary rows of an interactive run.
PER_PERIOD = "micro"  # the step's own period (for the memory score: the mean over users)
MEAN_OVER_PERIODS = "mean_over_periods"  # mean over periods 0..step (the reference's number)


def _period(value: Any) -> int | None:
    """A row's period, or None for the mean row (null, NaN, a negative number or a word)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def summary_rows(
    per_period: pd.DataFrame, keys: dict[str, Any], counts: dict[int, int]
) -> pd.DataFrame:
    """The scorer's rows (metric, period, value[, n]) as SCORES rows of step ``keys['step']``:
    that period's value (aggregate ``micro``) and the scorer's mean row (``mean_over_periods``)."""
    step = int(keys["step"])
    rows = []
    for row in per_period.to_dict("records"):
        period = _period(row.get("period"))
        if period is not None and period != step:
            continue
        n = row.get("n")
        if n is None or (isinstance(n, float) and math.isnan(n)):
            n = counts.get(period, 0) if period is not None else sum(counts.values())
        rows.append(
            {
                **keys,
                "metric": str(row["metric"]),
                "aggregate": MEAN_OVER_PERIODS if period is None else PER_PERIOD,
                "value": float(row["value"]),
                "n": int(n),
            }
        )
    return pd.DataFrame(rows, columns=SCORES.names)


def evolution_rows(records: pd.DataFrame, keys: dict[str, Any]) -> pd.DataFrame:
    """Self-evolution as SCORES rows of step ``keys['step']`` (none when the system does not
    evolve): ``section_changed``, the share of users whose section the period's evolution
    changed (``micro``) and over periods 0..step (``mean_over_periods``); ``evolution_unparsed``,
    the number of rewrites whose reply never parsed (the section was kept), likewise."""
    if records.empty:
        return pd.DataFrame(columns=SCORES.names)
    step = int(keys["step"])
    upto = records[records["period"] <= step]
    now = upto[upto["period"] == step]
    rows = []
    for metric, column, share in (
        ("section_changed", "changed", True),
        ("evolution_unparsed", "parse_ok", False),
    ):
        for aggregate, part in ((PER_PERIOD, now), (MEAN_OVER_PERIODS, upto)):
            if part.empty:
                continue
            values = part[column].astype(bool)
            value = float(values.mean()) if share else float((~values).sum())
            rows.append({**keys, "metric": metric, "aggregate": aggregate, "value": value,
                         "n": len(part)})  # fmt: skip
    return pd.DataFrame(rows, columns=SCORES.names)


#: Scorer metric -> failure of the DIAGNOSIS table.
FAILURES = {
    "accuracy": "correct",
    "write_failure_rate": "write",
    "read_failure_rate": "read",
    "utilization_failure_rate": "utilization",
}


def diagnosis_rows(
    per_period: pd.DataFrame, keys: dict[str, Any], counts: dict[int, int]
) -> pd.DataFrame:
    """Period ``keys['step']``: correct (accuracy) + write + read + utilization, adding up to 1.

    DIAGNOSIS has no protocol column, so an off-policy run's rows name the system
    ``<system>@replay``.
    """
    system = keys["system"] + ("" if keys["protocol"] == interactive.PROTOCOL else "@replay")
    step = int(keys["step"])
    rows = []
    for row in per_period.to_dict("records"):
        if _period(row.get("period")) != step or row["metric"] not in FAILURES:
            continue
        rows.append(
            {
                "benchmark": keys["benchmark"],
                "system": system,
                "step": step,
                "question_type": "all",
                "failure": FAILURES[row["metric"]],
                "rate": float(row["value"]),
                "n": int(counts.get(step, 0)),
            }
        )
    return pd.DataFrame(rows, columns=DIAGNOSIS.names)
