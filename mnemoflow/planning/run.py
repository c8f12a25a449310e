"""A whole run's plan from its config (``mnemoflow plan``, ``budget_usd``).

``mnemoflow plan`` passes the jobs a Snakemake dry run lists (rule and wildcards), so the plan is
of exactly the jobs that run; the parse-time budget check has no DAG yet and plans every static
QA job whose ledger does not exist yet (a finished job is not run again unless forced).

With ``repeats: N`` every repeat is planned with the role bindings its jobs call
(``mnemoflow.repeats.seeded_models``: the sampling roles' requests carry the repeat's seed, so
repeat k's are cache misses where repeat 0's were hits), and its ledgers under
``results/seed{S}/``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mnemoflow import layout
from mnemoflow.environment.knobs import resolved_benchmarks
from mnemoflow.eval.static_qa.panel import panel_of, probe_settings
from mnemoflow.llm.gateway import Gateway
from mnemoflow.planning import environment, feedback, interactive
from mnemoflow.planning.grid import run_units
from mnemoflow.planning.plan import ASSUMED_LATENCY_S, Plan
from mnemoflow.planning.static_qa import Context, Unit, group_of, panel_role, plan_probe
from mnemoflow.prices import FREE_BACKENDS, price_table
from mnemoflow.protocols import feedback as feedback_protocol
from mnemoflow.protocols import interactive as interactive_protocol
from mnemoflow.protocols.registry import protocols_of
from mnemoflow.protocols.static_qa import PROTOCOL
from mnemoflow.repeats import folder_seed, folders, seeded_models

log = logging.getLogger("mnemoflow")

#: The interactive rules the plan estimates (mnemoflow.planning.interactive).
INTERACTIVE_RULES = ("dialogues", "replay_dialogues", "upper_bound")
#: The environment generation rule the plan estimates (mnemoflow.planning.environment).
GENERATION_RULE = "generate_user"
#: The feedback rules the plan estimates (mnemoflow.planning.feedback).
FEEDBACK_RULES = ("feedback_train_dialogues", "feedback_step", "feedback_train_performance")
#: The static QA rules the plan estimates.
QA_RULES = ("ingest", "answer", "judge")
#: The judge panel's rules (``judge.panel``).
PANEL_RULE, PROBE_RULE = "judge_panel", "judge_probe"

#: A job of a dry run: (rule, wildcards).
Job = tuple[str, Mapping[str, str]]


def observed(workdir: Path, models: Mapping[str, str]) -> tuple[dict, dict]:
    """From earlier ledgers under the results folder in ``workdir`` of the same models: mean
    completion tokens per (role, task) (and per (role, None)), and seconds per call per role."""
    out: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0.0, 0.0])
    latency: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for path in (workdir / layout.RESULTS).glob("**/*.ledger.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for key, entry in (data.get("by_role_task") or {}).items():
            role, _, task = key.partition("/")
            misses = entry.get("calls", 0) - entry.get("cache_hits", 0)
            if role not in models or (data.get("models") or {}).get(role) != models[role]:
                continue
            if misses <= 0 or role == "embedder":
                continue
            for k in ((role, task), (role, None)):
                out[k][0] += entry.get("tokens_out", 0)
                out[k][1] += misses
            latency[role][0] += entry.get("latency_s", 0.0)
            latency[role][1] += misses
    means = {k: total / n for k, (total, n) in out.items() if n}
    seconds = {role: total / n for role, (total, n) in latency.items() if n}
    return means, seconds


def plan_run(
    config: Mapping[str, Any],
    workdir: Path | str = ".",
    jobs: Iterable[Job] | None = None,
    model_rules: Iterable[str] = (),
    priced_only: bool = False,
) -> Plan:
    """The plan of the run ``config`` describes, in ``workdir``.

    ``jobs``: the dry run's jobs (``None``: every static QA job whose ledger is missing);
    ``model_rules``: the workflow's model-calling rules (``RULE_ROLES``), so the jobs of those
    the plan does not estimate are named; ``priced_only``: only the dollars are wanted (roles on
    local backends are counted without looking their prompts up in the cache).
    """
    workdir = Path(workdir)
    benchmarks = resolved_benchmarks(config["benchmarks"])
    cache = workdir / Path(config.get("cache", layout.CACHE))
    if not (cache.exists() or cache.with_suffix(".sqlite").exists()):
        cache = None  # nothing cached yet; the plan creates nothing
    seed = int(config.get("seed", 0))
    repeats = folders(seed, int(config.get("repeats", 1)))
    gateway = Gateway.from_config(config["models"], cache)
    gateways = {"": gateway}
    judges = panel_of(config.get("judge"), config.get("endpoints"))
    panel = [(j, Gateway.from_config({"judge": j.model}, cache)) for j in judges]
    try:
        for folder in repeats[1:]:
            seeded = seeded_models(config["models"], folder_seed(folder, seed), seed)
            gateways[folder] = Gateway.from_config(seeded, cache)
        prices = price_table(config.get("prices"))
        panel_specs = {panel_role(j.name): g.specs["judge"] for j, g in panel}
        plan = Plan({**gateway.specs, **panel_specs}, prices)
        models = {role: spec.model for role, spec in gateway.specs.items()}
        means, seconds = observed(workdir, models)
        ctx = Context(
            config,
            benchmarks,
            workdir,
            gateway,
            out_means=means,
            priced_only=priced_only,
            panel=panel,
        )
        # one context per repeat, with its own gateway; the planned requests are shared: a
        # seeded role's requests differ between repeats anyway, and an unseeded role's (judge,
        # embedder, critic) asked again in a later repeat is answered by the cache, as it is in
        # the run
        contexts = {f: dataclasses.replace(ctx, gateway=g) for f, g in gateways.items()}
        #: static QA units: (repeat, benchmark, system, step, shard)
        units: dict[tuple[str, str, str, int, int], set[str]] = defaultdict(set)
        #: interactive and feedback jobs: (repeat, rule, benchmark, system, protocol, step, shard)
        talks: list[tuple[str, str, str, str, str, int, int]] = []
        #: benchmarks whose false-positive probe runs (``judge.panel``)
        probes: set[str] = set()
        if jobs is not None:
            jobs = list(jobs)
            plan.jobs = dict(Counter(rule for rule, _ in jobs))
            for rule, wc in jobs:
                repeat = wc.get("repeat", "")
                if rule in QA_RULES or rule == PANEL_RULE:
                    key = (wc["benchmark"], wc["system"], int(wc["step"]), int(wc["shard"]))
                    units[(repeat, *key)].add(rule)
                elif rule == PROBE_RULE:
                    probes.add(wc["benchmark"])
                elif rule in INTERACTIVE_RULES or rule in FEEDBACK_RULES or rule == GENERATION_RULE:
                    talks.append((repeat, *_talk(rule, wc)))
                elif rule in set(model_rules):
                    plan.unplanned[rule] = plan.unplanned.get(rule, 0) + 1
        else:
            grid = run_units(config, benchmarks, repeats, panel=bool(judges))
            _unplanned_protocols(config, benchmarks, plan, len(repeats))
            _missing(grid, workdir, benchmarks, units, talks, plan)
            probes |= _missing_panel(grid, workdir, units, plan)
        plan.latency = _latencies(config, gateway, seconds)
        for judge, each in panel:
            plan.latency.update(_panel_latency(config, judge.name, each))

        async def walk() -> None:
            for (_, benchmark, system, step, shard), stages in units.items():
                if stages & {"answer", "judge", PANEL_RULE}:  # units reading the same memory
                    ctx.replays.expect(group_of(ctx, benchmark, system, step, shard))
            for (repeat, benchmark, system, step, shard), stages in sorted(units.items()):
                unit = Unit(contexts[repeat], benchmark, system, step, shard)
                if "ingest" in stages:
                    for line in unit.ingest():
                        plan.add(line)
                if stages & {"answer", "judge", PANEL_RULE}:
                    for line in await unit.answer_and_judge(
                        "answer" in stages, "judge" in stages, PANEL_RULE in stages
                    ):
                        plan.add(line)
            size, seed = probe_settings(config.get("judge"))
            for benchmark in sorted(probes):
                for line in plan_probe(ctx, benchmark, size, seed):
                    plan.add(line)

        asyncio.run(walk())
        for repeat, rule, benchmark, system, protocol, step, shard in talks:
            ctx = contexts[repeat]
            if rule == "upper_bound":
                lines = interactive.plan_upper_bound(ctx, benchmark)
            elif rule == GENERATION_RULE:
                lines = environment.plan_generate_user(ctx, benchmark)
            elif rule == "feedback_train_dialogues":
                lines = feedback.plan_train_dialogues(ctx, benchmark, system)
            elif rule in FEEDBACK_RULES:
                lines = feedback.plan_step(ctx, benchmark, system, protocol, step)
            else:
                lines = interactive.plan_dialogues(ctx, benchmark, system, protocol, step, shard)
            if lines is None:
                plan.unplanned[rule] = plan.unplanned.get(rule, 0) + 1
            for line in lines or ():
                plan.add(line)
    finally:
        for each in [*gateways.values(), *(g for _, g in panel)]:
            each.close()
    if plan.unplanned:
        plan.notes.append(
            "the calls of the jobs listed as not estimated are not in the totals (a lower bound)"
        )
    return plan


def _talk(rule: str, wc: Mapping[str, str]) -> tuple[str, str, str, str, int, int]:
    if rule == "upper_bound":
        return (rule, wc["benchmark"], "-", "upper_bound", 0, 0)
    if rule == GENERATION_RULE:
        return (rule, wc["benchmark"], "-", "generate", int(wc["user"]), 0)
    if rule == "feedback_train_dialogues":
        return (rule, wc["benchmark"], wc["system"], "feedback", 0, 0)
    step, shard = int(wc.get("step", 0)), int(wc.get("shard", 0))
    return (rule, wc["benchmark"], wc["system"], wc["protocol"], step, shard)


#: The talking rules a grid unit is planned as, and the protocol name the plan files it under.
_TALKS = {"upper_bound": "upper_bound", GENERATION_RULE: "generate"}


def _missing(grid: list[layout.Unit], workdir: Path, benchmarks, units, talks, plan) -> None:
    """The grid's model-calling jobs whose ledger does not exist yet (every repeat)."""
    planned = (*QA_RULES, *INTERACTIVE_RULES, *FEEDBACK_RULES, GENERATION_RULE)
    for unit in layout.select(grid, *planned, repeat=None, by_protocol=True):
        if (workdir / unit.outputs["ledger"]).is_file():
            continue
        keys, rule = unit.keys, unit.rule
        repeat, benchmark = keys.get("repeat", ""), keys["benchmark"]
        if rule in QA_RULES:
            units[(repeat, benchmark, keys["system"], keys["step"], keys["shard"])].add(rule)
            plan.jobs[rule] = plan.jobs.get(rule, 0) + 1
        elif rule in _TALKS:
            talks.append((repeat, rule, benchmark, "-", _TALKS[rule], keys.get("user", 0), 0))
        elif rule == "feedback_train_dialogues":
            # recorded dialogues cost no call: only generated ones are planned
            if feedback_protocol.dialogue_source(benchmarks[benchmark]) == "generated":
                talks.append((repeat, rule, benchmark, keys["system"], "feedback", 0, 0))
        else:
            step, shard = keys["step"], keys.get("shard", 0)
            talks.append((repeat, rule, benchmark, keys["system"], keys["protocol"], step, shard))


def _unplanned_protocols(config, benchmarks, plan: Plan, repeats: int) -> None:
    """A protocol of no built-in family: its runs are named as not estimated."""
    known = {PROTOCOL, *interactive_protocol.PROTOCOLS, *feedback_protocol.PROTOCOLS}
    for benchmark in config["run"]["benchmarks"]:
        spec = benchmarks[benchmark]
        systems = layout.systems_of(config, benchmarks, benchmark)
        for protocol in protocols_of(benchmark, spec):
            if protocol not in known:
                plan.unplanned[protocol] = plan.unplanned.get(protocol, 0) + len(systems) * repeats


def _missing_panel(grid: list[layout.Unit], workdir: Path, units, plan: Plan) -> set[str]:
    """The panel's jobs without a ledger (repeat 0's static QA shards, each benchmark's probe):
    a shard's judge_panel joins its unit; returns the benchmarks whose probe is to run."""
    for unit in layout.select(grid, PANEL_RULE):
        if not (workdir / unit.outputs["ledger"]).is_file():
            keys = unit.keys
            units[("", keys["benchmark"], keys["system"], keys["step"], keys["shard"])].add(
                PANEL_RULE
            )
            plan.jobs[PANEL_RULE] = plan.jobs.get(PANEL_RULE, 0) + 1
    probes = {
        unit.keys["benchmark"]
        for unit in layout.select(grid, PROBE_RULE)
        if not (workdir / unit.outputs["ledger"]).is_file()
    }
    if probes:
        plan.jobs[PROBE_RULE] = len(probes)
    return probes


def _panel_latency(config, name: str, gateway: Gateway) -> dict[str, tuple[float, str]]:
    """A panel judge's seconds per call: plan.latency_s of its role (``judge[NAME]``), else
    none on a local backend, else the assumed latency."""
    role = panel_role(name)
    configured = (config.get("plan") or {}).get("latency_s") or {}
    if role in configured:
        return {role: (float(configured[role]), "plan.latency_s")}
    if gateway.specs["judge"].backend in FREE_BACKENDS:
        return {role: (0.0, "local")}
    return {role: (ASSUMED_LATENCY_S, "assumed")}


def _latencies(config, gateway: Gateway, measured: Mapping[str, float]) -> dict:
    configured = (config.get("plan") or {}).get("latency_s") or {}
    out = {}
    for role, spec in gateway.specs.items():
        if role in configured:
            out[role] = (float(configured[role]), "plan.latency_s")
        elif spec.backend in FREE_BACKENDS:
            out[role] = (0.0, "local")
        elif role in measured:
            out[role] = (round(measured[role], 3), "earlier ledgers")
        else:
            out[role] = (ASSUMED_LATENCY_S, "assumed")
    return out
