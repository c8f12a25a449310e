"""The run's jobs from its config: each benchmark's tiling as its owners tell it, walked by
:func:`mnemoflow.layout.units`. The rules' targets (rules/common.smk) and the planner's expected
jobs (planning/run.py) are both this one list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemoflow import layout
from mnemoflow.environment.knobs import method_of
from mnemoflow.protocols import feedback, interactive
from mnemoflow.protocols.registry import protocol_steps, protocols_of
from mnemoflow.protocols.static_qa import PROTOCOL as QA

#: The static QA chain: three jobs per shard, the step's scores.
QA_SHARD_RULES = ("ingest", "answer", "judge")
QA_STEP_RULES = ("score",)
#: The interactive protocols' dialogue rule by protocol.
DIALOGUE_RULES = {interactive.PROTOCOL: "dialogues", interactive.REPLAY: "replay_dialogues"}


def chain(protocol: str, spec: Mapping[str, Any]) -> layout.Chain:
    """The jobs ``protocol`` runs on a benchmark with ``spec`` (a protocol none of the built-in
    families knows: its steps, no job)."""
    steps = protocol_steps(protocol, dict(spec))
    if protocol == QA:
        return layout.Chain(steps, shard=QA_SHARD_RULES, step=QA_STEP_RULES)
    if protocol in interactive.PROTOCOLS:
        return layout.Chain(
            steps,
            shard=(DIALOGUE_RULES[protocol],),
            benchmark=("upper_bound",),
            run=("score_interactive",),
        )
    if protocol in feedback.PROTOCOLS:
        builds = feedback.built_protocol(protocol) == protocol
        step = "feedback_step" if builds else "feedback_train_performance"
        return layout.Chain(
            steps,
            step=(step, "normalize") if normalizes(spec) else (step,),
            system=("feedback_train_dialogues",) if feedback.replays_recorded(protocol) else (),
        )
    return layout.Chain(steps)


def normalizes(spec: Mapping[str, Any]) -> bool:
    """A MemoryBench domain / task set with an official statistics file (``normalize: {stats:
    FILE}``; with ``scoring: judge``, ``normalize: {}`` uses the shipped 0-1 statistics)."""
    selected = spec.get("set") or spec.get("select")
    if spec.get("normalize") is None or not selected:
        return False
    return not feedback.set_name(selected).startswith("dataset:")


def tiling(name: str, spec: Mapping[str, Any]) -> layout.Tiling:
    """Benchmark ``name``'s jobs: its protocols' chains and its environment's makers."""
    chains = {p: chain(p, spec) for p in protocols_of(name, dict(spec))}
    environment: tuple[tuple[str, int], ...] = ()
    if method_of(spec) == "llm":
        environment = (("generate_user", int(spec["generate"]["num_user_profiles"])),)
        environment += (("environment", 1),)
    elif method_of(spec) and set(chains) & set(interactive.PROTOCOLS):
        environment = (("generate_amemgym", 1),)
    # the static QA and feedback chains read the prepared tables; an errata overlay's
    # data_version.json is reported for every benchmark that has one
    prepared = bool(set(chains) & {QA, *feedback.PROTOCOLS}) or bool(spec.get("errata"))
    return layout.Tiling(chains, int(spec.get("shards", 1)), prepared, environment)


def run_units(
    config: Mapping[str, Any],
    benchmarks: Mapping[str, Any],
    repeats: tuple[str, ...] | list[str] = ("",),
    panel: bool = False,
) -> list[layout.Unit]:
    """Every job of the run (``benchmarks``: the resolved specs; ``repeats``: the ``{repeat}``
    folders; ``panel``: ``judge.panel`` is set)."""
    return layout.units(config, benchmarks, tiling, repeats, panel)
