"""The run's results layout and grid: where every file of a run lives, and which jobs a run has.

One owner for both, so the rules' outputs, their ``all`` targets, the planner's expected jobs,
the drill-down's and the export's paths cannot drift apart. A leaf: it knows no protocol, no
loader and no model; what a protocol runs per step or shard is told to :func:`units` by the
protocols' owner (``mnemoflow.protocols.grid``).

Every pattern carries the ``{repeat}`` folder of ``repeats: N`` where a job runs once per seed
(``""`` for repeat 0, ``seed{S}/`` for the others: ``mnemoflow.repeats``); prepared data,
environments and the probe are the benchmark's, shared by every repeat.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

#: The folder every result lives under (the working directory's).
RESULTS = "results"
#: A benchmark's prepared tables (rule prepare).
PREPARED = f"{RESULTS}/{{benchmark}}/prepared"
#: One step of one (benchmark, system, protocol) run: scores.parquet, diagnosis.parquet, ...
RUN_STEP = f"{RESULTS}/{{repeat}}{{benchmark}}/{{system}}/{{protocol}}/step{{step}}"
#: A shard of a step (static QA's and the interactive protocols' jobs).
RUN_SHARD = f"{RUN_STEP}/shard{{shard}}"
#: The static QA chain (protocol ``qa``): its steps and shards.
QA = "qa"
STEP = RUN_STEP.replace("{protocol}", QA)
SHARD = RUN_SHARD.replace("{protocol}", QA)
#: The AMemGym upper bound of a benchmark (``.parquet`` and ``.ledger.json``).
UPPER_BOUND = f"{RESULTS}/{{repeat}}{{benchmark}}/upper_bound"
#: An interactive benchmark's environment and what generating it with a model writes.
ENVIRONMENT_DIR = f"{RESULTS}/{{benchmark}}/environment"
ENVIRONMENT = f"{ENVIRONMENT_DIR}/data.json"
GENERATED_USER = f"{ENVIRONMENT_DIR}/users/{{user}}"
GENERATION_REPORT = f"{ENVIRONMENT_DIR}/generation_report.parquet"
#: Stage checkpoints of one generated user (deliberately not an output: a rerun reuses them).
GENERATION_STAGES = f"{ENVIRONMENT_DIR}/stages/{{user}}"
#: The feedback protocols' training dialogues of a (benchmark, system).
FEEDBACK_TRAIN = f"{RESULTS}/{{repeat}}{{benchmark}}/{{system}}/feedback"
#: A benchmark's false-positive probe (``judge.panel``).
PROBE = f"{RESULTS}/{{benchmark}}/probe"
#: Job logs mirror their outputs' folders (RLOGS: the jobs of one repeat).
LOGS = f"{RESULTS}/logs"
BENCHMARK_LOGS = f"{LOGS}/{{benchmark}}"
REPEAT_LOGS = f"{LOGS}/{{repeat}}{{benchmark}}"


def log(folder: str, name: str) -> str:
    """The log of a job writing into ``folder`` (a results pattern), mirrored under LOGS."""
    if not folder.startswith(f"{RESULTS}/"):
        raise ValueError(f"{folder!r} is not a results pattern")
    return f"{LOGS}/{folder[len(RESULTS) + 1 :]}/{name}.log"


#: Run-wide folders: the response cache (the config's ``cache:`` default), managed endpoints'
#: state and logs, corrupt outputs moved aside.
CACHE = f"{RESULTS}/cache/llm"
ENDPOINTS = f"{RESULTS}/endpoints"
ENDPOINT_LOGS = f"{LOGS}/endpoints"
QUARANTINE = f"{RESULTS}/quarantine"
#: The ``{repeat}`` folder of repeat k >= 1.
REPEAT_FOLDER = "seed{seed}/"
#: An exported run's file name (``mnemoflow export``), before the format's suffix.
EXPORT_NAME = "{benchmark}.{system}.{protocol}.step{step}"


def _ledgered(folder: str, ledger: str, **tables: str) -> tuple[str, dict[str, str]]:
    """A rule's outputs: Parquet ``tables`` (name -> file stem) and its ledger, in ``folder``."""
    return folder, {**{name: f"{stem}.parquet" for name, stem in tables.items()}, "ledger": ledger}


#: Each rule's outputs: its folder pattern and ``output name -> file`` in it (the rules'
#: ``output:`` names). ``score_interactive`` writes the step files of every interactive run.
_OUTPUTS: dict[str, tuple[str, dict[str, str]]] = {
    "prepare": (
        PREPARED,
        {
            "sessions": "sessions.parquet",
            "questions": "questions.parquet",
            "episode_sessions": "episode_sessions.parquet",
            "dialogues": "dialogues.parquet",
            "data_version": "data_version.json",
            "notes": "notes.txt",
        },
    ),
    "ingest": (SHARD, {"snapshot": "memory", "ledger": "ingest.ledger.json"}),
    "answer": (SHARD, {"answers": "answers.parquet", "ledger": "answers.ledger.json"}),
    "judge": (
        SHARD,
        {
            "judgements": "judgements.parquet",
            "ledger": "judgements.ledger.json",
            "settings": "judge.json",
        },
    ),
    "score": (
        STEP,
        {
            "scores": "scores.parquet",
            "question_scores": "question_scores.parquet",
            "diagnosis": "diagnosis.parquet",
        },
    ),
    "judge_panel": _ledgered(SHARD, "panel.ledgers.json", panel_judgements="panel_judgements"),
    "judge_probe": _ledgered(PROBE, "panel.ledgers.json", probe_judgements="probe_judgements"),
    "generate_amemgym": (ENVIRONMENT_DIR, {"environment": "data.json"}),
    "generate_user": (
        f"{ENVIRONMENT_DIR}/users",
        {"user": "{user}.json", "ledger": "{user}.ledger.json"},
    ),
    "environment": (ENVIRONMENT_DIR, {"data": "data.json", "report": "generation_report.parquet"}),
    "upper_bound": _ledgered(
        f"{RESULTS}/{{repeat}}{{benchmark}}", "upper_bound.ledger.json", replies="upper_bound"
    ),
    "feedback_train_dialogues": _ledgered(
        FEEDBACK_TRAIN, "train_dialogues.ledger.json", dialogues="train_dialogues"
    ),
    "normalize": (RUN_STEP, {"normalized": "normalized.parquet"}),
    "summarize": (
        RESULTS,
        {"summary": "summary.parquet", "diagnosis": "diagnosis.parquet", "table": "summary.md"},
    ),
    "report": (RESULTS, {"html": "report.html", "derived": "report"}),
}
_DIALOGUES = {
    "dialogues": "dialogues.parquet",
    "snapshot": "memory",
    "replies": "checkpoint_replies.parquet",
    "recall": "recall_replies.parquet",
    "ledger": "dialogues.ledger.json",
    "evolution": "evolution.parquet",
}
_OUTPUTS["dialogues"] = _OUTPUTS["replay_dialogues"] = (RUN_SHARD, _DIALOGUES)
_SCORED = {
    "answers": "answers.parquet",
    "scores": "scores.parquet",
    "question_scores": "question_scores.parquet",
    "judgements": "judgements.parquet",
    "diagnosis": "diagnosis.parquet",
    "ledger": "step.ledger.json",
}
_OUTPUTS["feedback_step"] = (
    RUN_STEP,
    {"dialogues": "dialogues.parquet", "snapshot": "memory", **_SCORED},
)
_OUTPUTS["feedback_train_performance"] = (RUN_STEP, _SCORED)
#: score_interactive: these files of every interactive step of a repeat.
INTERACTIVE_SCORES = {
    "scores": "scores.parquet",
    "question_scores": "question_scores.parquet",
    "diagnosis": "diagnosis.parquet",
    "period_scores": "period_scores.parquet",
}
#: Outputs that are folders (Snakemake's ``directory()``).
DIRECTORIES = frozenset({"snapshot", "derived"})


def output_patterns(rule: str) -> dict[str, str]:
    """``rule``'s outputs as wildcard patterns, by their ``output:`` names."""
    folder, files = _OUTPUTS[rule]
    return {name: f"{folder}/{file}" for name, file in files.items()}


def outputs(rule: str, keys: Mapping[str, Any]) -> dict[str, str]:
    """``rule``'s output paths for one job's ``keys`` (its wildcards)."""
    return {name: fill(pattern, keys) for name, pattern in output_patterns(rule).items()}


def fill(pattern: str, keys: Mapping[str, Any]) -> str:
    """``pattern`` with ``keys``; a run key ``pattern`` does not use is ignored."""
    return pattern.format(**{"repeat": "", **keys})


def under(root: str | PathLike, pattern: str, keys: Mapping[str, Any]) -> Path:
    """``pattern`` with ``keys`` in the results folder ``root`` (which may have any name)."""
    return Path(root) / fill(pattern, keys).removeprefix(f"{RESULTS}/")


def folder(keys: Mapping[str, Any]) -> str:
    """The folder of a run's step (``shard`` given: of its shard; no ``protocol``: static QA's)."""
    pattern = RUN_SHARD if keys.get("shard") is not None else RUN_STEP
    return fill(pattern, {"protocol": QA, **keys})


def previous_snapshot(pattern: str, keys: Mapping[str, Any]) -> str | list[str]:
    """The memory snapshot step k of ``pattern`` (a step or shard folder) builds on: step k-1's
    in the same folder pattern; none (``[]``) for step 0."""
    step = int(keys["step"])
    return [] if step == 0 else f"{fill(pattern, {**keys, 'step': step - 1})}/memory"


def ledger(rule: str, keys: Mapping[str, Any]) -> str:
    """The ledger file a job of ``rule`` with ``keys`` writes."""
    return outputs(rule, keys)["ledger"]


def export_name(keys: Mapping[str, Any]) -> str:
    """An exported step's file name (without the format's suffix)."""
    return EXPORT_NAME.format(**keys)


_RUN_PATH = re.compile(
    r"(?:^|/)(?:(?P<repeat>seed\d+/))?(?P<benchmark>[^/]+)/(?P<system>[^/]+)/(?P<protocol>[^/]+)"
    r"/step(?P<step>\d+)(?:/shard(?P<shard>\d+))?/[^/]+$"
)
_SEED = re.compile(rf"(?:^|/){RESULTS}/seed(\d+)/")


def parse(path: str) -> dict[str, Any] | None:
    """Run keys of a file in a step or shard folder (``benchmark``, ``system``, ``protocol``,
    ``step``, ``shard`` or ``None``, ``repeat``), found from the path's end so the results
    folder may have any name; ``None`` for a path elsewhere."""
    found = _RUN_PATH.search(str(path).replace("\\", "/"))
    if found is None:
        return None
    keys: dict[str, Any] = found.groupdict()
    keys["repeat"] = keys["repeat"] or ""
    keys["step"] = int(keys["step"])
    keys["shard"] = None if keys["shard"] is None else int(keys["shard"])
    return keys


#: What :func:`parse` reads, for error messages.
RUN_FILE = "{benchmark}/{system}/{protocol}/step{k}[/shard{h}]/<file>"
#: A run's step folder under a results folder, for error messages.
RUN_FOLDER = "{benchmark}/{system}/{protocol}/step{k}/"


def path_seed(path: str) -> int | None:
    """The seed of a file under ``results/seed{S}/``; ``None`` for repeat 0's (``results/...``)."""
    found = _SEED.search(str(path).replace("\\", "/"))
    return int(found.group(1)) if found else None


# --- the grid -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chain:
    """The jobs one protocol runs on a benchmark, by what each runs once per (the protocol's
    owner says which: ``mnemoflow.protocols.grid``)."""

    steps: int
    shard: tuple[str, ...] = ()  # per (system, step, shard)
    step: tuple[str, ...] = ()  # per (system, step)
    system: tuple[str, ...] = ()  # per system (the feedback protocols' training dialogues)
    benchmark: tuple[str, ...] = ()  # per benchmark and repeat (the AMemGym upper bound)
    run: tuple[str, ...] = ()  # per repeat, over every run of the protocol (interactive scoring)
    #: (system, protocol, rule): another run whose shard jobs this chain reads, step by step and
    #: shard by shard (interactive_replay memorizes the source system's on-policy transcripts)
    source: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class Tiling:
    """How one benchmark's jobs tile the grid: its protocols' chains, and the jobs that make
    its environment (shared by every repeat)."""

    chains: Mapping[str, Chain]
    shards: int = 1
    prepared: bool = True  # its tables are prepared (rule prepare)
    environment: tuple[tuple[str, int], ...] = ()  # (rule, jobs): generate_user per user, ...


@dataclass(frozen=True)
class Unit:
    """One job of the run: its rule, its keys (the rule's wildcards) and its output paths.
    ``rank`` orders units by (repeat, benchmark, system, protocol, step, shard) position."""

    rule: str
    keys: Mapping[str, Any]
    outputs: Mapping[str, Any]
    rank: tuple[int, ...] = field(default=(), compare=False)
    #: a job another run reads but the run does not score (a replayed source's dialogues)
    source: bool = field(default=False, compare=False)

    @property
    def protocol_rank(self) -> tuple[int, ...]:
        """``rank`` with protocol before system (the order runs of one protocol are listed)."""
        r = self.rank
        return (*r[:2], r[3], r[2], *r[4:]) if len(r) >= 4 else r


def systems_of(config: Mapping[str, Any], benchmarks: Mapping[str, Any], name: str) -> list[str]:
    """The systems run on benchmark ``name``: its own ``systems:`` list, else run.systems."""
    return list(benchmarks[name].get("systems", config["run"]["systems"]))


def units(
    config: Mapping[str, Any],
    benchmarks: Mapping[str, Any],
    tiling: Callable[[str, Mapping[str, Any]], Tiling],
    repeats: Iterable[str] = ("",),
    panel: bool = False,
) -> list[Unit]:
    """Every job of the run ``config`` describes (``benchmarks``: its resolved benchmark specs,
    ``tiling(name, spec)``: the benchmark's :class:`Tiling`, ``repeats``: the ``{repeat}``
    folders, ``panel``: whether ``judge.panel`` judges repeat 0's static QA shards), in the
    order (repeat, benchmark, system, protocol, step, shard), then summarize and report."""
    names = list(config["run"]["benchmarks"])
    folders = list(repeats)
    tilings = {b: tiling(b, benchmarks[b]) for b in names}
    out: list[Unit] = []
    seen: set[tuple] = set()

    def add(rule: str, rank: tuple[int, ...], source: bool = False, **keys: Any) -> None:
        key = (rule, tuple(sorted(keys.items())))
        if key not in seen:
            seen.add(key)
            out.append(Unit(rule, keys, outputs(rule, keys), rank, source))

    for r, repeat in enumerate(folders):
        scored: list[tuple[tuple[int, ...], str, dict[str, Any]]] = []
        for i, b in enumerate(names):
            tiles = tilings[b]
            sources: list[tuple[int, Chain, dict[str, Any]]] = []
            if not r and tiles.prepared:
                add("prepare", (r, i), benchmark=b)
            if not r:
                for rule, jobs in tiles.environment:
                    for user in range(jobs):
                        users = {"user": user} if rule == "generate_user" else {}
                        add(rule, (r, i), benchmark=b, **users)
            for chain in tiles.chains.values():
                for rule in chain.benchmark:
                    add(rule, (r, i), repeat=repeat, benchmark=b)
            systems = systems_of(config, benchmarks, b)
            for j, s in enumerate(systems):
                for q, (p, chain) in enumerate(tiles.chains.items()):
                    run = dict(repeat=repeat, benchmark=b, system=s)
                    for rule in chain.system:
                        add(rule, (r, i, j, q), **run)
                    own = run if p == QA else {**run, "protocol": p}
                    for k in range(chain.steps):
                        for h in range(tiles.shards if chain.shard else 0):
                            for rule in chain.shard:
                                add(rule, (r, i, j, q, k, h), **own, step=k, shard=h)
                            if panel and not r and p == QA:
                                add("judge_panel", (r, i, j, q, k, h), **own, step=k, shard=h)
                        for rule in chain.step:
                            add(rule, (r, i, j, q, k), **own, step=k)
                        for rule in chain.run:
                            keys = {**run, "protocol": p, "step": k}
                            scored.append(((i, q, j, k), rule, keys))
                    if chain.source:
                        sources.append((len(sources), chain, run))
            # a source run the benchmark does not run itself (listed after its own runs)
            for n, chain, run in sources:
                system, protocol, rule = chain.source
                for k in range(chain.steps):
                    for h in range(tiles.shards):
                        keys = {**run, "system": system, "protocol": protocol, "step": k}
                        add(rule, (r, i, len(systems), n, k, h), True, **keys, shard=h)
        scored.sort(key=lambda item: item[0])
        for rule in dict.fromkeys(rule for _, rule, _ in scored):
            steps = [keys for _, each, keys in scored if each == rule]
            files = {
                name: [f"{fill(RUN_STEP, keys)}/{file}" for keys in steps]
                for name, file in INTERACTIVE_SCORES.items()
            }
            out.append(Unit(rule, {"repeat": repeat}, files, (r, len(names))))
    if panel:
        for b in sorted({u.keys["benchmark"] for u in out if u.rule == "judge_panel"}):
            add("judge_probe", (0, names.index(b)), benchmark=b)
    for rule in ("summarize", "report"):
        add(rule, (len(folders),))
    return out


def run_steps(
    found: Iterable[Unit], repeat: str | None = "", by_protocol: bool = False
) -> list[dict[str, Any]]:
    """Every (benchmark, system, protocol, step) some unit of ``found`` works in (of one
    repeat; ``None``: of all), in the grid's order (``by_protocol``: protocol before system),
    as keys with ``repeat``."""
    steps: dict[tuple, tuple[tuple[int, ...], dict[str, Any]]] = {}
    for u in found:
        if "step" not in u.keys or "system" not in u.keys or u.rule == "judge_panel" or u.source:
            continue
        keys = {
            "repeat": u.keys.get("repeat", ""),
            "benchmark": u.keys["benchmark"],
            "system": u.keys["system"],
            "protocol": u.keys.get("protocol", QA),
            "step": u.keys["step"],
        }
        if repeat is None or keys["repeat"] == repeat:
            rank = u.protocol_rank if by_protocol else u.rank
            steps.setdefault(tuple(keys.values()), (rank[:5], keys))
    return [keys for _, keys in sorted(steps.values(), key=lambda item: item[0])]


def select(
    found: Iterable[Unit], *rules: str, repeat: str | None = "", by_protocol: bool = False
) -> list[Unit]:
    """The units of ``rules`` (of one repeat; ``repeat=None``: of all), in the grid's order
    (``by_protocol``: protocol before system)."""
    chosen = [
        u
        for u in found
        if u.rule in rules and (repeat is None or u.keys.get("repeat", "") == repeat)
    ]
    return sorted(chosen, key=lambda u: u.protocol_rank) if by_protocol else chosen


class Grid:
    """The run's units and the file lists the workflow's targets ask of them (each in the order
    the rules have always listed them: the grid's, or protocol before system)."""

    def __init__(self, found: list[Unit]):
        self.units = found
        self.repeats = list(dict.fromkeys(u.keys.get("repeat", "") for u in found))

    def files(self, name: str, *rules: str, repeat: str = "", by_protocol: bool = False):
        """Output ``name`` of every job of ``rules`` (of one repeat)."""
        chosen = select(self.units, *rules, repeat=repeat, by_protocol=by_protocol)
        return [unit.outputs[name] for unit in chosen]

    def shard_files(self, name: str, *rules: str, by_protocol: bool = False) -> list[str]:
        """``name`` in the folder of every job of ``rules`` (repeat 0's)."""
        chosen = select(self.units, *rules, by_protocol=by_protocol)
        return [f"{folder(unit.keys)}/{name}" for unit in chosen]

    def step_files(self, name: str, repeat: str = "", protocols=None, wildcard=False):
        """``name`` in every step folder of the run (of one repeat; ``protocols`` given: of
        theirs, protocol before system; ``wildcard``: with the ``{repeat}`` wildcard)."""
        steps = run_steps(self.units, repeat, by_protocol=protocols is not None)
        chosen = [k for k in steps if protocols is None or k["protocol"] in protocols]
        own = {"repeat": "{repeat}"} if wildcard else {}
        return [f"{folder({**keys, **own})}/{name}" for keys in chosen]

    def benchmarks(self, *rules: str) -> list[str]:
        """The benchmarks some job of ``rules`` works on, by name."""
        return sorted({unit.keys["benchmark"] for unit in select(self.units, *rules)})

    def ledgers(self, repeat: str = "") -> list[str]:
        """Every ledger of the run's model-calling jobs (of one repeat: the environments' are
        repeat 0's; the feedback training dialogues' are left out: not every protocol runs it)."""
        talks = ("dialogues", "replay_dialogues")
        return (
            self.files("ledger", "ingest", "answer", "judge", repeat=repeat)
            + self.files("ledger", *talks, repeat=repeat, by_protocol=True)
            + sorted(self.files("ledger", "upper_bound", repeat=repeat))
            + (self.files("ledger", "generate_user") if not repeat else [])
            + self.files("ledger", "feedback_step", "feedback_train_performance", repeat=repeat)
        )

    def other_repeats(self, query: Callable[[str], list[str]]) -> list[str]:
        """``query(repeat)`` of repeats 1..N-1 (none without ``repeats:``)."""
        return [path for repeat in self.repeats[1:] for path in query(repeat)]
