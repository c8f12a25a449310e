# Config validation and every input / params helper of the workflow, one section per family (rules
# stay declarative). Helpers are one-line lookups: what a knob means is asked of its owner in the
# library (memory systems, protocols, environment generation), never decided here.
import re
from types import SimpleNamespace

from snakemake.utils import validate

from mnemoflow.codeversion import code_version
from mnemoflow.config_layers import check_layer_order
from mnemoflow.config_schema import check_config
from mnemoflow.data.errata import errata_inputs
from mnemoflow.data.integrity import sweep_results
from mnemoflow.data.published import PUBLISHED_DIR
from mnemoflow.data.registry import check_benchmarks
from mnemoflow.data.sources import local_source_file
from mnemoflow.environment.knobs import (
    GENERATOR_ROLES,
    generated_with,
    resolved_benchmarks,
)
from mnemoflow.amemgym_world import TOPICS
from mnemoflow.environment.personas import PERSONAS, personas_file, shipped_path
from mnemoflow.eval.benchmark_metric import scoring_of
from mnemoflow.eval.memorybench_judge_protocol import statistics_file
from mnemoflow.eval.judges import kind_for as judge_kind_for
from mnemoflow.eval.panel import panel_budgets, panel_of, probe_settings, public_panel
from mnemoflow.eval.panel import panel_limits as panel_job_limits
from mnemoflow.llm.addresses import public_bindings, redacted_config
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.limits import endpoint_budgets, job_limits
from mnemoflow.llm.types import (
    check_batch_rules,
    check_bindings,
    online,
    played_by,
    refuse_batch,
)
from mnemoflow.ops.endpoints import stop_all as stop_endpoints
from mnemoflow.planning.budget import check_budget, planning
from mnemoflow.memory.base import (
    check_installed,
    check_systems,
    stage_roles,
    stage_spec,
    without_labels,
)
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols import interactive
from mnemoflow.protocols.registry import protocol_steps, protocols_of
from mnemoflow.protocols.static_qa import check_reader, retrieval_log_path
from mnemoflow.repeats import PATTERN as REPEAT_PATTERN
from mnemoflow.repeats import folder_seed, folders, seeded_models
from mnemoflow.report.reproduction import request_of

# a preset's requires_layers against the --configfile order (mnemoflow/config_layers.py)
check_layer_order(workflow.overwrite_configfiles, workflow.basedir)
# one-line errors naming the key first; snakemake's validate then fills in the defaults
check_config(config, workflow.source_path("../schemas/config.schema.yaml"))
validate(config, schema="../schemas/config.schema.yaml")
# every benchmark as the jobs see it: `generate: {method: llm}` with all its knobs (preset +
# overrides, checked); config itself stays as written
BENCHMARKS = resolved_benchmarks(config["benchmarks"])
# every role's binding with its `endpoint: NAME` resolved (an external endpoint's base_url, a
# managed one's endpoint://NAME, which each job resolves to the running server: docs/slurm.md)
BINDINGS = bind_endpoints(config["models"], config.get("endpoints"))
# each role's spec as written (URL syntax, credentials) before its address is redacted below;
# keys and offline roles are checked once every helper is defined (the end of this file)
check_bindings(BINDINGS, require_keys=False)
# the same with every base_url redacted (scheme://host:port + a hash of the path): all params,
# resource names and ledgers see only these; a job finds the real address in the config
# (docs/gateway.md, "Secrets")
MODELS = public_bindings(BINDINGS)
# the published numbers the run reproduces (a paper preset: configs/paper/, docs/reproduce.md)
PUBLISHED_REQUEST = request_of(config, BENCHMARKS)

for _name in config["run"]["benchmarks"]:
    if _name not in BENCHMARKS:
        raise ValueError(
            f"config run.benchmarks: {_name!r} is not defined under benchmarks"
        )
for _name in config["run"]["systems"]:
    if _name not in config["systems"]:
        raise ValueError(f"config run.systems: {_name!r} is not defined under systems")
check_systems(config["systems"])  # each system's parameters against its params_schema
# each run benchmark's loader known, its source present (or a pinned download), its params typed
check_benchmarks(BENCHMARKS, config["run"]["benchmarks"])
for _name in config["run"]["benchmarks"]:
    protocols_of(_name, BENCHMARKS[_name])  # known protocols only
    scoring_of(BENCHMARKS[_name])  # MemoryBench's scoring: paper | judge
    check_reader(
        BENCHMARKS[_name], f"config benchmarks.{_name}"
    )  # name, options, log file
    for _system in BENCHMARKS[_name].get("systems", []):
        if _system not in config["systems"]:
            raise ValueError(
                f"config benchmarks.{_name}.systems: {_system!r} is not defined under systems"
            )

#: The run's seed (option order, sampling, splits, simulators); the judge has its own.
SEED = config.get("seed", 0)
#: `repeats: N` runs the chain once per seed SEED..SEED+N-1 (mnemoflow/repeats.py). The {repeat}
#: wildcard of repeat 0 is "" (today's paths and params: repeats: 1 re-runs nothing); repeat k's
#: is "seed{SEED+k}/", a mirror of the run's tree under results/seed{SEED+k}/. Prepared data and
#: environments are the benchmark's, shared by every repeat.
REPEATS = int(config.get("repeats", 1))
REPEAT_FOLDERS = folders(SEED, REPEATS)
PREPARED = "results/{benchmark}/prepared"
# Every protocol writes scores.parquet and diagnosis.parquet per step under RUN_STEP; the static
# QA chain (rules ingest / answer / judge / score) lives under STEP and SHARD, its protocol "qa".
RUN_STEP = "results/{repeat}{benchmark}/{system}/{protocol}/step{step}"
STEP = "results/{repeat}{benchmark}/{system}/qa/step{step}"
SHARD = f"{STEP}/shard{{shard}}"
# A job's log mirrors its outputs' folder under results/logs/ (RLOGS: the jobs of one repeat).
LOGS = "results/logs/{benchmark}"
RLOGS = "results/logs/{repeat}{benchmark}"


wildcard_constraints:
    repeat=REPEAT_PATTERN,
    benchmark=r"[A-Za-z0-9_.-]+",
    system=r"[A-Za-z0-9_.-]+",
    protocol=r"[A-Za-z0-9_]+",
    step=r"\d+",
    shard=r"\d+",


# --- the run: benchmarks, systems, protocols, steps, shards ------------------------------------


def benchmark_spec(wildcards):
    return BENCHMARKS[wildcards.benchmark]


#: Spec keys that shape the protocols, not the data: editing them must not re-run prepare.
PROTOCOL_KEYS = ("protocols", "feedback", "normalize", "scoring")


def data_spec(wildcards):
    """The benchmark's spec as the loader sees it (without the protocol settings)."""
    spec = benchmark_spec(wildcards)
    return {k: v for k, v in spec.items() if k not in PROTOCOL_KEYS}


def benchmark_source(wildcards):
    """The benchmark's local source file (if it is one), so replacing it re-runs prepare."""
    return local_source_file(benchmark_spec(wildcards))


def benchmark_errata(wildcards):
    """The benchmark's errata overlay file (if it names one), so editing it re-runs prepare."""
    return errata_inputs(benchmark_spec(wildcards))


def system_spec(wildcards):
    # labels (published_as) are for comparisons: a job never reads them, a change re-runs nothing
    return without_labels(config["systems"][wildcards.system])


def n_shards(wildcards):
    return int(benchmark_spec(wildcards).get("shards", 1))


def protocols_for(benchmark):
    return protocols_of(benchmark, BENCHMARKS[benchmark])


def systems_for(benchmark):
    """The systems run on ``benchmark``: its own ``systems:`` list, else run.systems."""
    return BENCHMARKS[benchmark].get("systems", config["run"]["systems"])


def run_systems():
    """Every system some run benchmark runs."""
    return {s for b in config["run"]["benchmarks"] for s in systems_for(b)}


def steps_of(benchmark, protocol="qa"):
    return range(protocol_steps(protocol, BENCHMARKS[benchmark]))


def shards_of(benchmark):
    return range(int(BENCHMARKS[benchmark].get("shards", 1)))


def previous_snapshot(folder):
    """Input function: step k builds on the snapshot of step k-1 in ``folder`` (a path pattern
    of the job's own wildcards); step 0 starts empty."""

    def snapshot(wildcards):
        step = int(wildcards.step)
        if step == 0:
            return []
        return f"{folder.format(**{**dict(wildcards), 'step': step - 1})}/memory"

    return snapshot


def run_seed(wildcards):
    """Params function: the run seed of the job's repeat (SEED in repeat 0)."""
    return folder_seed(wildcards.repeat, SEED)


def repeat_models(bindings, wildcards):
    """``bindings`` as the job's repeat calls them: in repeat k >= 1 each sampling role sends its
    own seed + k, so no repeat is served another's replies from the cache (mnemoflow/repeats.py).
    """
    return seeded_models(bindings, run_seed(wildcards), SEED)


def all_step_files(name, repeat=""):
    """``name`` in every (benchmark, system, protocol, step) folder of the run (of one repeat)."""
    return [
        f"{RUN_STEP.format(repeat=repeat, benchmark=b, system=s, protocol=p, step=k)}/{name}"
        for b in config["run"]["benchmarks"]
        for s in systems_for(b)
        for p in protocols_for(b)
        for k in steps_of(b, p)
    ]


def all_data_versions():
    """``data_version.json`` of every benchmark the static QA chain reads from prepare."""
    return [
        f"{PREPARED.format(benchmark=b)}/data_version.json"
        for b in config["run"]["benchmarks"]
        if "qa" in protocols_for(b) or BENCHMARKS[b].get("errata")
    ]


def all_repeat_scores():
    """The scores (and MemoryBench's normalized scores) of repeats 1..N-1: the summary's spread
    across seeds. Empty without repeats, so ``repeats: 1`` plans what a run always planned.
    """
    return [
        path
        for repeat in REPEAT_FOLDERS[1:]
        for path in all_step_files("scores.parquet", repeat) + all_normalized(repeat)
    ]


def get_final_output():
    return ["results/summary.parquet", "results/summary.md", "results/report.html"]


def published_request():
    """What the run's config compares with (a paper preset's ``compare:``, its systems'
    ``published_as``; mnemoflow/report/reproduction.py), {} for nothing."""
    return PUBLISHED_REQUEST.as_params() if PUBLISHED_REQUEST else {}


def published_tables():
    """The shipped published-number CSVs, when the run compares with them."""
    if PUBLISHED_REQUEST is None or not PUBLISHED_REQUEST.shipped:
        return []
    return [str(p) for p in sorted(PUBLISHED_DIR.glob("*.csv"))]


def run_loaders():
    """benchmark -> {loader} of the run's benchmarks (which benchmark published rows are)."""
    return {b: {"loader": BENCHMARKS[b]["loader"]} for b in config["run"]["benchmarks"]}


def report_config():
    """The config the report shows: as written, with every benchmark as the jobs saw it and every
    endpoint address redacted."""
    return redacted_config({**config, "benchmarks": BENCHMARKS})


# --- models: one role tuple per rule ------------------------------------------------------------

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


#: The model-calling rules each protocol's chain runs (the roles a run uses, see run_roles).
PROTOCOL_RULES = {
    "qa": ("ingest", "answer", "judge"),
    "interactive": ("dialogues", "upper_bound"),
    "interactive_replay": ("dialogues", "replay_dialogues", "upper_bound"),
    **dict.fromkeys(
        fb.PROTOCOLS, tuple(r for r in RULE_ROLES if r.startswith("feedback"))
    ),
}


def run_rules():
    """The model-calling rules the run uses: its protocols' (a protocol not listed: every
    rule), and the generators' where it generates an environment with a model."""
    names = {
        name
        for b in config["run"]["benchmarks"]
        for p in protocols_for(b)
        for name in PROTOCOL_RULES.get(p, RULE_ROLES)
    }
    return names | ({"generate_user"} if llm_generated() else set())


def run_roles():
    """The roles the run's rules bind."""
    return {role for name in run_rules() for role in RULE_ROLES[name]}


# Each model endpoint is a global resource whose budget is its concurrency (a --resources value wins);
# jobs that call it hold a share (endpoint_limits), so limits hold for the whole run (docs/gateway.md).
for _name, _budget in endpoint_budgets(MODELS).items():
    if _name not in workflow.global_resources:
        workflow.register_resource(_name, _budget)


def endpoint_limits(rule):
    """The rule's share of the endpoints its roles call: .resources to declare, .params to pass."""
    return job_limits(MODELS, RULE_ROLES[rule], config.get("endpoint_jobs", 4))


def models(*roles):
    """The bindings of the roles a job uses: a change to another role re-runs nothing here."""
    return {role: MODELS.get(role, {}) for role in roles}


def rule_models(rule):
    return models(*RULE_ROLES[rule])


def sampled_models(rule):
    """Params function: the rule's bindings as the job's repeat calls them (repeat_models)."""

    def bindings(wildcards):
        return repeat_models(rule_models(rule), wildcards)

    return bindings


def user_prices():
    """The config's prices: (over the shipped table): the summary re-prices the ledgers with
    them, so a price edit re-renders the summary and re-runs no model job."""
    return config.get("prices")


def summary_models():
    """Backend and model of every role the run's rules use or the config names (summary.md):
    changing one re-renders the summary, a sampling parameter does not."""
    return played_by(MODELS, run_roles() | set(MODELS))


# --- static QA: ingest, answer, judge, score ----------------------------------------------------


def ingest_system(wildcards):
    """The system's type and ingest-time parameters (a query-time change re-runs no ingest)."""
    return stage_spec(system_spec(wildcards), "ingest")


def query_system(wildcards):
    """The system's type and query-time parameters; the rest comes from the snapshot."""
    return stage_spec(system_spec(wildcards), "query")


def ingest_models(wildcards):
    """The bindings of the roles the system writes or embeds with while ingesting."""
    bindings = models(*stage_roles(system_spec(wildcards), "ingest"))
    return repeat_models(bindings, wildcards)


def answer_models(wildcards):
    """The agent's binding and those of the roles the system calls while retrieving."""
    bindings = models("agent", *stage_roles(system_spec(wildcards), "query"))
    return repeat_models(bindings, wildcards)


def reader_of(wildcards):
    return benchmark_spec(wildcards).get("reader", "generic")


def reader_inputs(wildcards):
    """Files the reader reads (an official retrieval log), so editing one re-runs answering."""
    path = retrieval_log_path(reader_of(wildcards))
    return [path] if path else []


def judge_kind(wildcards):
    return judge_kind_for(benchmark_spec(wildcards))


def use_options_of(wildcards):
    return bool(benchmark_spec(wildcards).get("use_options", False))


def judge_setting(name, default):
    return config.get("judge", {}).get(name, default)


def shard_files(name):
    """Input function: ``name`` in every shard of the job's (benchmark, system, step)."""

    def files(wildcards):
        return expand(
            f"{SHARD}/{name}",
            repeat=wildcards.repeat,
            benchmark=wildcards.benchmark,
            system=wildcards.system,
            step=wildcards.step,
            shard=shards_of(wildcards.benchmark),
        )

    return files


def all_runs(repeat=""):
    """(benchmark, system, step, shard) of every static QA job chain of the run (of one repeat)."""
    return [
        dict(repeat=repeat, benchmark=b, system=s, step=k, shard=h)
        for b in config["run"]["benchmarks"]
        if "qa" in protocols_for(b)
        for s in systems_for(b)
        for k in steps_of(b)
        for h in shards_of(b)
    ]


def all_judgements():
    return [f"{SHARD.format(**run)}/judgements.parquet" for run in all_runs()]


def all_ledgers(repeat=""):
    """Every ledger of the run (of one repeat: the environments' are repeat 0's)."""
    return (
        [
            f"{SHARD.format(**run)}/{name}.ledger.json"
            for run in all_runs(repeat)
            for name in ("ingest", "answers", "judgements")
        ]
        + all_interactive_ledgers(repeat)
        + all_feedback_ledgers(repeat)
    )


def all_repeat_ledgers():
    """The ledgers of repeats 1..N-1: the cost of the repeats (none without)."""
    return [path for repeat in REPEAT_FOLDERS[1:] for path in all_ledgers(repeat)]


def all_feedback_ledgers(repeat=""):
    """step.ledger.json of every step of the run's feedback protocols (the training dialogues'
    own ledger is left out: not every protocol runs that rule)."""
    return [
        f"{RUN_STEP.format(repeat=repeat, benchmark=b, system=s, protocol=p, step=k)}/step.ledger.json"
        for b in config["run"]["benchmarks"]
        for s in systems_for(b)
        for p in protocols_for(b)
        if p in fb.PROTOCOLS
        for k in steps_of(b, p)
    ]


# --- judge panel and false-positive probe: `judge.panel` (mnemoflow/eval/panel.py) ----------

#: The panel's judges (none: the rules judge_panel and judge_probe have no job).
PANEL = public_panel(panel_of(config.get("judge"), config.get("endpoints")))
PROBE_SIZE, PROBE_SEED = probe_settings(config.get("judge"))
PROBE = "results/{benchmark}/probe"
for _judge in PANEL:
    check_bindings({"judge": _judge.model}, require_keys=False)
    refuse_batch(_judge.model, f"judge.panel ({_judge.name})")


def check_keys():
    """Every key variable the run's roles and panel judges name is set (when a run starts)."""
    for bindings in [MODELS, *({"judge": judge.model} for judge in PANEL)]:
        check_bindings(bindings)


for _name, _budget in panel_budgets(MODELS, PANEL).items():
    if _name not in workflow.global_resources:
        workflow.register_resource(_name, _budget)


def panel_params():
    return [{"name": j.name, "kind": j.kind, "model": j.model} for j in PANEL]


def panel_limits(with_configured=False):
    """A panel job's share of its judges' endpoints (the probe's: the configured judge's too)."""
    bindings = [j.model for j in PANEL]
    bindings += [MODELS.get("judge", {})] if with_configured else []
    return panel_job_limits(MODELS, bindings, config.get("endpoint_jobs", 4))


def configured_judge(wildcards):
    """The configured judge as the probe asks it: the benchmark's judge kind, models.judge
    (asked online: the probe's job does not run in Batch-API mode)."""
    return {"kind": judge_kind(wildcards), "model": online(MODELS.get("judge", {}))}


def all_panel_files(name):
    """``name`` of every static QA shard when the config has a panel, else none."""
    return [f"{SHARD.format(**run)}/{name}" for run in all_runs()] if PANEL else []


def all_probe_files(name):
    """``name`` of every static QA benchmark's probe when the config has a panel, else none."""
    if not PANEL:
        return []
    benchmarks = {run["benchmark"] for run in all_runs()}
    return [f"{PROBE.format(benchmark=b)}/{name}" for b in sorted(benchmarks)]


# --- interactive protocols (AMemGym): `protocols: [interactive, interactive_replay]` ----------

ENVIRONMENT = "results/{benchmark}/environment/data.json"
ISHARD = f"{RUN_STEP}/shard{{shard}}"
UPPER_BOUND = "results/{repeat}{benchmark}/upper_bound"


def reference_upper_bound(wildcards):
    """Score the upper bound with the reference's state-tuple lookup (docs/interactive.md)."""
    return interactive.reference_upper_bound(benchmark_spec(wildcards))


def environment_file(wildcards):
    """The benchmark's data.json: generated (generate_amemgym, or the environment rule for
    `generate: {method: llm}`), or source.path."""
    spec = benchmark_spec(wildcards)
    if spec.get("generate"):
        return ENVIRONMENT.format(benchmark=wildcards.benchmark)
    return spec["source"]["path"]


def generate_spec(wildcards):
    return benchmark_spec(wildcards)["generate"]


def schedule(wildcards):
    return interactive.schedule_of(benchmark_spec(wildcards))


def replay_dialogues(wildcards):
    """The source system's on-policy transcripts of this period and shard, to memorize."""
    source = interactive.replay_source(benchmark_spec(wildcards))
    keys = {**dict(wildcards), "system": source, "protocol": interactive.PROTOCOL}
    return f"{ISHARD.format(**keys)}/dialogues.parquet"


def all_interactive_ledgers(repeat=""):
    """Ledgers of the interactive runs (dialogues per shard, the upper bound per benchmark) and,
    in repeat 0, of the environments they share."""
    runs = [
        (b, s, p)
        for b in config["run"]["benchmarks"]
        for p in protocols_for(b)
        if p in interactive.PROTOCOLS
        for s in systems_for(b)
    ]
    ledgers = [
        f"{ISHARD.format(repeat=repeat, benchmark=b, system=s, protocol=p, step=k, shard=h)}/dialogues.ledger.json"
        for b, s, p in runs
        for k in steps_of(b, p)
        for h in shards_of(b)
    ]
    benchmarks = sorted({b for b, _, _ in runs})
    return (
        ledgers
        + [
            f"{UPPER_BOUND.format(repeat=repeat, benchmark=b)}.ledger.json"
            for b in benchmarks
        ]
        + (all_generation_ledgers() if not repeat else [])
    )


# --- interactive scoring: one job per repeat (rule score_interactive) ---------------------------
# A step's AMemGym scoring is seconds of CPU, less than a job's start-up, so one job scores every
# interactive step of a repeat, each step into its own folder as before; a step's files and knobs
# travel in params.steps, the rule's input and output lists are their union. Static QA keeps a
# score job per step: its scoring reads every snapshot of the step (LongMemEval-S: seconds per
# system), which runs in parallel across systems and shards.


def scored_step_files(protocols, name):
    """Output list: ``name`` in every step folder of ``protocols``' runs, under the {repeat}."""
    return [
        f"{RUN_STEP.format(repeat='{repeat}', benchmark=b, system=s, protocol=p, step=k)}/{name}"
        for b, s, p in runs_with(protocols)
        for k in steps_of(b, p)
    ]


def interactive_scored_steps(wildcards):
    """Params function: every interactive step of the job's repeat, its files and knobs."""
    steps = []
    for b, s, p in runs_with(interactive.PROTOCOLS):
        spec = SimpleNamespace(benchmark=b)
        for k in steps_of(b, p):
            keys = dict(repeat=wildcards.repeat, benchmark=b, system=s, protocol=p)
            shards = [
                ISHARD.format(**keys, step=j, shard=h)
                for j in range(k + 1)
                for h in shards_of(b)
            ]
            folder = RUN_STEP.format(**keys, step=k)
            steps.append(
                dict(
                    run=dict(benchmark=b, system=s, protocol=p, step=k),
                    environment=environment_file(spec),
                    replies=[f"{shard}/checkpoint_replies.parquet" for shard in shards],
                    recall=[f"{shard}/recall_replies.parquet" for shard in shards],
                    evolution=[f"{shard}/evolution.parquet" for shard in shards],
                    upper=f"{UPPER_BOUND.format(repeat=wildcards.repeat, benchmark=b)}.parquet",
                    scores=f"{folder}/scores.parquet",
                    question_scores=f"{folder}/question_scores.parquet",
                    diagnosis=f"{folder}/diagnosis.parquet",
                    period_scores=f"{folder}/period_scores.parquet",
                    reference_upper_bound=reference_upper_bound(spec),
                )
            )
    return steps


def scored_inputs(steps_of_job, names):
    """Input function: the files ``names`` of every step ``steps_of_job`` lists (each once)."""

    def inputs(wildcards):
        steps = steps_of_job(wildcards)
        found = {}
        for name in names:
            files = []
            for step in steps:
                value = step[name]
                files.extend(value if isinstance(value, list) else [value])
            found[name] = list(dict.fromkeys(files))
        return found

    return inputs


# --- environments generated with a model (`generate: {method: llm}`, rules/environment.smk) ---

GENERATED_USER = "results/{benchmark}/environment/users/{user}"
GENERATION_REPORT = "results/{benchmark}/environment/generation_report.parquet"


def benchmarks_generated_with(method):
    """A wildcard constraint matching exactly the benchmarks ``method`` generates (none: no match),
    so generate_amemgym and environment never both claim a data.json."""
    names = generated_with(BENCHMARKS, method)
    return "|".join(re.escape(name) for name in names) if names else "(?!)"


def generation_knobs(wildcards):
    """Every knob (resolved from the preset at startup), without the persona source."""
    spec = generate_spec(wildcards)
    return {k: v for k, v in spec.items() if k not in ("method", "preset", "personas")}


def personas_source(wildcards):
    return personas_file(generate_spec(wildcards))


def stage_checkpoints(wildcards):
    return f"results/{wildcards.benchmark}/environment/stages/{wildcards.user}"


def generated_users(wildcards):
    n = int(generate_spec(wildcards)["num_user_profiles"])
    return expand(
        f"{GENERATED_USER}.json", benchmark=wildcards.benchmark, user=range(n)
    )


def llm_generated():
    return [
        b for b in config["run"]["benchmarks"] if b in generated_with(BENCHMARKS, "llm")
    ]


def all_generation_reports():
    return [GENERATION_REPORT.format(benchmark=b) for b in llm_generated()]


def all_generation_ledgers():
    return [
        f"{GENERATED_USER.format(benchmark=b, user=u)}.ledger.json"
        for b in llm_generated()
        for u in range(int(BENCHMARKS[b]["generate"]["num_user_profiles"]))
    ]


# --- learning from feedback (MemoryBench): rules/feedback.smk ----------------------------------

FB_TRAIN = "results/{repeat}{benchmark}/{system}/feedback"
FB_TRAIN_FILE = f"{FB_TRAIN}/train_dialogues.parquet"
FB_PROTOCOLS = "|".join(fb.PROTOCOLS)
FB_BUILT = "|".join(p for p in fb.PROTOCOLS if fb.built_protocol(p) == p)


def fb_loader(wildcards):
    return benchmark_spec(wildcards)["loader"]


def fb_scoring(wildcards):
    """MemoryBench's scoring protocol of the benchmark (``paper`` | ``judge``)."""
    return scoring_of(benchmark_spec(wildcards))


def fb_source(wildcards):
    return fb.dialogue_source(benchmark_spec(wildcards))


def fb_step_path(name):
    """Input function: ``name`` of the step whose memory the job's protocol reads."""

    def path(wildcards):
        built = fb.built_protocol(wildcards.protocol)
        return f"{RUN_STEP.format(**{**dict(wildcards), 'protocol': built})}/{name}"

    return path


def fb_train_input(wildcards):
    """The recorded training dialogues a step replays (on-policy converses its own)."""
    if not fb.replays_recorded(wildcards.protocol):
        return []
    return FB_TRAIN_FILE.format(**dict(wildcards))


def fb_stage_settings(stage):
    """Params function: the ``feedback:`` settings ``stage`` reads (FeedbackConfig says which)."""

    def settings(wildcards):
        step = int(getattr(wildcards, "step", 0))
        protocol = getattr(wildcards, "protocol", "")
        return fb.stage_settings(benchmark_spec(wildcards), stage, protocol, step)

    return settings


def fb_models(stage):
    """Params function: the bindings of the roles ``stage`` calls (the protocol says which)."""

    def bindings(wildcards):
        bound = tuple(role for role, spec in MODELS.items() if spec)
        step = int(getattr(wildcards, "step", 0))
        protocol = getattr(wildcards, "protocol", "")
        spec = benchmark_spec(wildcards)
        return repeat_models(
            models(*fb.stage_roles(spec, stage, protocol, step, bound)), wildcards
        )

    return bindings


def fb_selected(spec):
    """The set a MemoryBench benchmark names (``set: KIND:NAME`` or ``select: {KIND: NAME}``)."""
    return spec.get("set") or spec.get("select")


def fb_set_name(wildcards):
    return fb.set_name(fb_selected(benchmark_spec(wildcards)))


def fb_dataset_configs(wildcards):
    return benchmark_spec(wildcards)["configs"]


def fb_normalize_stats(wildcards):
    """The set's statistics file: ``normalize.stats``; under ``scoring: judge`` without one, the
    shipped 0-1 statistics of the upstream judge protocol (data/memorybench/)."""
    spec = benchmark_spec(wildcards)
    given = (spec.get("normalize") or {}).get("stats")
    where = f"config benchmarks.{wildcards.benchmark}.normalize.stats"
    return str(statistics_file(given, scoring_of(spec), where=where))


def fb_normalizes(spec):
    """A domain / task set with an official statistics file (``normalize: {stats: FILE}``; with
    ``scoring: judge``, ``normalize: {}`` uses the shipped 0-1 statistics)."""
    if spec.get("normalize") is None or not fb_selected(spec):
        return False
    return not fb.set_name(fb_selected(spec)).startswith("dataset:")


def all_normalized(repeat=""):
    """normalized.parquet of every step of a MemoryBench domain / task set with a stats file."""
    return [
        f"{RUN_STEP.format(repeat=repeat, benchmark=b, system=s, protocol=p, step=k)}/normalized.parquet"
        for b in config["run"]["benchmarks"]
        if fb_normalizes(BENCHMARKS[b])
        for s in config["run"]["systems"]
        for p in protocols_for(b)
        if p != "qa"
        for k in steps_of(b, p)
    ]


# --- the run's role bindings, checked once every helper above is defined -----------------------

# every role's endpoint; no role the run uses silently offline beside real models (the key
# variables are checked when a run starts: Snakefile's onstart; a dry run or plan needs none)
check_bindings(
    BINDINGS,
    used=run_roles(),
    allow_offline=config.get("allow_offline_roles", []),
    require_keys=False,
)
# Batch-API mode only for roles whose every rule in the run collects a job's requests
check_batch_rules(MODELS, {name: RULE_ROLES[name] for name in run_rules()})
# every system the run uses installed (a product's extra: the pip install to run)
check_installed(config["systems"], run_systems())
# a corrupt table or ledger under results/ is moved to results/quarantine/ and made again
# (docs/reliability.md "Corrupt outputs"); valid files stay as they are
sweep_results(workflow.is_main_process)
# budget_usd: a run whose plan (docs/plan.md) would cost more refuses to start; without it, nothing
check_budget(
    {**config, "models": MODELS}, workflow.is_main_process, model_rules=RULE_ROLES
)


# --- the report's per-question drill-down: rules/report.smk ---------------------------------


def runs_with(protocols):
    """(benchmark, system, protocol) of every run whose protocol is one of ``protocols``."""
    return [
        (b, s, p)
        for b in config["run"]["benchmarks"]
        for p in protocols_for(b)
        if p in protocols
        for s in systems_for(b)
    ]


def all_feedback_step_files(name):
    """``name`` in every step folder of the run's feedback protocols."""
    return [
        f"{RUN_STEP.format(repeat='', benchmark=b, system=s, protocol=p, step=k)}/{name}"
        for b, s, p in runs_with(fb.PROTOCOLS)
        for k in steps_of(b, p)
    ]


def all_answers():
    """The answers of every static QA shard and feedback step (the drill-down's rows)."""
    static = [f"{SHARD.format(**run)}/answers.parquet" for run in all_runs()]
    return static + all_feedback_step_files("answers.parquet")


def all_snapshots():
    """The memory every static QA shard answered from (the per-question diagnosis reads it)."""
    return [f"{SHARD.format(**run)}/memory" for run in all_runs()]


def all_prepared(name):
    """``name`` of every prepared benchmark the run answers questions of (static QA, feedback)."""
    benchmarks = sorted({b for b, _, _ in runs_with(("qa", *fb.PROTOCOLS))})
    return [f"{PREPARED.format(benchmark=b)}/{name}" for b in benchmarks]


def all_interactive_step_files(name):
    """``name`` in every step folder of the interactive runs."""
    return [
        f"{RUN_STEP.format(repeat='', benchmark=b, system=s, protocol=p, step=k)}/{name}"
        for b, s, p in runs_with(interactive.PROTOCOLS)
        for k in steps_of(b, p)
    ]


def all_interactive_shard_files(name):
    """``name`` in every shard of every step of the interactive runs."""
    return [
        f"{ISHARD.format(repeat='', benchmark=b, system=s, protocol=p, step=k, shard=h)}/{name}"
        for b, s, p in runs_with(interactive.PROTOCOLS)
        for k in steps_of(b, p)
        for h in shards_of(b)
    ]


def interactive_environments():
    """benchmark -> its data.json, for every interactive benchmark of the run."""
    benchmarks = sorted({b for b, _, _ in runs_with(interactive.PROTOCOLS)})
    return {b: environment_file(SimpleNamespace(benchmark=b)) for b in benchmarks}
