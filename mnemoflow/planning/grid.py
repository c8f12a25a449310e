"""The run's jobs from its config: each benchmark's tiling as its owners tell it, walked by
:func:`mnemoflow.layout.units`. The rules' targets (rules/common.smk) and the planner's expected
jobs (planning/run.py) are both this one list."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from mnemoflow import layout
from mnemoflow.environment.knobs import GENERATOR_ROLES, generated_with, method_of
from mnemoflow.errors import ConfigError
from mnemoflow.eval.imported import IMPORTED, check_imported
from mnemoflow.protocols import feedback, interactive
from mnemoflow.protocols.registry import protocol_steps, protocols_of
from mnemoflow.protocols.static_qa import PROTOCOL as QA

#: The static QA chain: three jobs per shard, the step's scores.
QA_SHARD_RULES = ("ingest", "answer", "judge")
QA_STEP_RULES = ("score",)
#: The interactive protocols' dialogue rule by protocol.
DIALOGUE_RULES = {interactive.PROTOCOL: "dialogues", interactive.REPLAY: "replay_dialogues"}


#: The roles each rule's jobs may call. A rule's endpoint shares (resources), in-job limits and
#: (where no memory system narrows them) model bindings all come from its one tuple.
RULE_ROLES = {
    "ingest": ("memory_writer", "embedder"),
    "answer": ("agent", "memory_writer", "embedder"),
    "judge": ("judge",),
    "dialogues": ("agent", "user", "memory_writer", "embedder"),
    "replay_dialogues": ("agent", "memory_writer", "embedder"),
    "upper_bound": ("agent",),
    "generate_user": GENERATOR_ROLES,
    "feedback_train_dialogues": ("agent", "user", "judge", "memory_writer", "embedder"),
    "feedback_step": ("agent", "user", "judge", "memory_writer", "embedder"),
    "feedback_train_performance": ("agent", "judge", "memory_writer", "embedder"),
}
#: The model-calling rules each protocol's chain runs (replaying another system's transcripts
#: runs that system's dialogues too).
PROTOCOL_RULES = {
    QA: QA_SHARD_RULES,
    interactive.PROTOCOL: ("dialogues", "upper_bound"),
    interactive.REPLAY: ("dialogues", "replay_dialogues", "upper_bound"),
    **dict.fromkeys(feedback.PROTOCOLS, tuple(r for r in RULE_ROLES if r.startswith("feedback"))),
}


def run_rules(config: Mapping[str, Any], benchmarks: Mapping[str, Any]) -> set[str]:
    """The model-calling rules the run uses: its protocols' rules (a protocol not listed: every
    rule), and the generators' where it generates an environment with a model."""
    names = {
        name
        for b in config["run"]["benchmarks"]
        for p in protocols_of(b, dict(benchmarks[b]))
        for name in PROTOCOL_RULES.get(p, RULE_ROLES)
    }
    generated = set(generated_with(benchmarks, "llm")) & set(config["run"]["benchmarks"])
    return names | ({"generate_user"} if generated else set())


def run_roles(config: Mapping[str, Any], benchmarks: Mapping[str, Any]) -> set[str]:
    """The roles the run's rules bind (:func:`run_rules`)."""
    return {role for name in run_rules(config, benchmarks) for role in RULE_ROLES[name]}


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
            source=(
                (interactive.replay_source(dict(spec)), interactive.PROTOCOL, "dialogues")
                if protocol == interactive.REPLAY
                else None
            ),
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


def check_run(config: Mapping[str, Any], benchmarks: Mapping[str, Any]) -> None:
    """Every name the grid walks is defined: run.benchmarks, run.systems, each benchmark's own
    ``systems:``, and its protocols are known; an imported system runs static QA only, from its
    file with its sha256 (:func:`~mnemoflow.eval.imported.check_imported`)."""
    for name in config["run"]["benchmarks"]:
        if name not in benchmarks:
            raise ConfigError(f"config run.benchmarks: {name!r} is not defined under benchmarks")
    for name in config["run"]["systems"]:
        if name not in config["systems"]:
            raise ConfigError(f"config run.systems: {name!r} is not defined under systems")
    for name in config["run"]["benchmarks"]:
        protocols_of(name, benchmarks[name])  # known protocols only
        for system in benchmarks[name].get("systems", []):
            if system not in config["systems"]:
                raise ConfigError(
                    f"config benchmarks.{name}.systems: {system!r} is not defined under systems"
                )
        check_imported(
            config["systems"],
            benchmarks[name].get("systems", config["run"]["systems"]),
            protocols_of(name, benchmarks[name]),
            f"config benchmarks.{name}",
        )
        if interactive.REPLAY in protocols_of(name, benchmarks[name]):
            source = interactive.interactive_options(benchmarks[name]).get("off_policy_source")
            if (config["systems"].get(source) or {}).get("type") == IMPORTED:
                raise ConfigError(
                    f"config benchmarks.{name}.interactive.off_policy_source: {source!r} is "
                    "imported: its file holds no transcripts to replay"
                )


def scored_steps(
    units: list[layout.Unit],
    repeat: str,
    benchmarks: Mapping[str, Any],
    environment: Callable[[Any], str],
) -> list[dict[str, Any]]:
    """Every interactive step of a repeat as rule score_interactive's job reads it: its run,
    environment (``environment(wildcards)``: the benchmark's data.json), the replies of its
    shards up to the step, the upper bound, the files it writes and the upper bound's scoring."""
    shards = layout.select(units, *DIALOGUE_RULES.values(), repeat=repeat)
    steps = []
    for keys in layout.run_steps(units, repeat, by_protocol=True):
        if keys["protocol"] not in interactive.PROTOCOLS:
            continue
        run = {k: keys[k] for k in ("benchmark", "system", "protocol")}
        upto = [
            layout.folder(u.keys)
            for u in shards
            if {k: u.keys[k] for k in run} == run and u.keys["step"] <= keys["step"]
        ]
        folder = layout.folder(keys)
        spec = benchmarks[keys["benchmark"]]
        steps.append(
            dict(
                run=dict(run, step=keys["step"]),
                environment=environment(SimpleNamespace(benchmark=keys["benchmark"])),
                replies=[f"{shard}/checkpoint_replies.parquet" for shard in upto],
                recall=[f"{shard}/recall_replies.parquet" for shard in upto],
                evolution=[f"{shard}/evolution.parquet" for shard in upto],
                upper=f"{layout.fill(layout.UPPER_BOUND, keys)}.parquet",
                scores=f"{folder}/scores.parquet",
                question_scores=f"{folder}/question_scores.parquet",
                diagnosis=f"{folder}/diagnosis.parquet",
                period_scores=f"{folder}/period_scores.parquet",
                reference_upper_bound=interactive.reference_upper_bound(spec),
            )
        )
    return steps
