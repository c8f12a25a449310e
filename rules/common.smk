# Config validation and every input / params helper of the workflow, one section per family (rules
# stay declarative). Helpers are one-line lookups: what a knob means is asked of its owner in the
# library (memory systems, protocols, environment generation), never decided here.
import re
from types import SimpleNamespace

from snakemake.utils import validate

from mnemoflow import layout
from mnemoflow.codeversion import code_version
from mnemoflow.config_layers import check_layer_order
from mnemoflow.config_schema import check_config
from mnemoflow.data.errata import errata_inputs
from mnemoflow.data.integrity import sweep_results
from mnemoflow.data.published import PUBLISHED_DIR
from mnemoflow.data.registry import check_benchmarks
from mnemoflow.data.sources import local_source_file
from mnemoflow.environment.knobs import generated_with, resolved_benchmarks
from mnemoflow.amemgym_world import TOPICS
from mnemoflow.environment.personas import PERSONAS, personas_file, shipped_path
from mnemoflow.eval.benchmark_metric import scoring_of
from mnemoflow.eval.memorybench.memorybench_judge_protocol import statistics_file
from mnemoflow.eval.imported import IMPORTED
from mnemoflow.eval.static_qa.judges import kind_for as judge_kind_for
from mnemoflow.eval.static_qa.panel import panel_budgets, panel_of, probe_settings
from mnemoflow.eval.static_qa.panel import public_panel
from mnemoflow.eval.static_qa.panel import panel_limits as panel_job_limits
from mnemoflow.llm.addresses import public_bindings, redacted_config
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.limits import endpoint_budgets, job_limits
from mnemoflow.llm.types import check_batch_rules, check_bindings, online
from mnemoflow.llm.types import played_by, refuse_batch
from mnemoflow.ops.endpoints import stop_all as stop_endpoints
from mnemoflow.planning.budget import check_budget, planning
from mnemoflow.planning.grid import RULE_ROLES, check_run, run_roles, run_rules
from mnemoflow.planning.grid import run_units, scored_steps
from mnemoflow.memory.base import check_installed, check_systems, stage_roles
from mnemoflow.memory.base import stage_spec, without_labels
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols import interactive
from mnemoflow.protocols.registry import protocols_of
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

# run.benchmarks / run.systems / a benchmark's systems defined, its protocols known, imported
# systems' files there; each run benchmark's loader known, its source present, its params typed
check_run(config, BENCHMARKS)
check_systems(config["systems"])  # each system's parameters against its params_schema
check_benchmarks(BENCHMARKS, config["run"]["benchmarks"])
for _name in config["run"]["benchmarks"]:
    scoring_of(BENCHMARKS[_name])  # MemoryBench's scoring: paper | judge
    check_reader(BENCHMARKS[_name], f"config benchmarks.{_name}")  # name, options, log

#: The run's seed (option order, sampling, splits, simulators); the judge has its own.
SEED = config.get("seed", 0)
#: `repeats: N` runs the chain once per seed SEED..SEED+N-1 (mnemoflow/repeats.py). The {repeat}
#: wildcard of repeat 0 is "" (today's paths and params: repeats: 1 re-runs nothing); repeat k's
#: is "seed{SEED+k}/", a mirror of the run's tree under results/seed{SEED+k}/. Prepared data and
#: environments are the benchmark's, shared by every repeat.
REPEATS = int(config.get("repeats", 1))
REPEAT_FOLDERS = folders(SEED, REPEATS)
# The results layout is mnemoflow/layout.py's: every protocol writes scores.parquet and
# diagnosis.parquet per step under RUN_STEP; the static QA chain (rules ingest / answer / judge /
# score) lives under STEP and SHARD, its protocol "qa". A job's log mirrors its outputs' folder
# under results/logs/ (RLOGS: the jobs of one repeat).
PREPARED, RUN_STEP, STEP, SHARD = (
    layout.PREPARED,
    layout.RUN_STEP,
    layout.STEP,
    layout.SHARD,
)
LOGS, RLOGS = layout.BENCHMARK_LOGS, layout.REPEAT_LOGS


def outputs(rule):
    """``rule``'s ``output:`` patterns, as the layout names them (folders marked directory)."""
    patterns = layout.output_patterns(rule)
    return {
        name: directory(p) if name in layout.DIRECTORIES else p
        for name, p in patterns.items()
    }


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


def spec_of(read):
    """A params / input function: ``read`` of the job's benchmark spec."""

    def value(wildcards):
        return read(benchmark_spec(wildcards))

    return value


# what a job reads of its benchmark spec
benchmark_source = spec_of(local_source_file)  # replacing it re-runs prepare
benchmark_errata = spec_of(errata_inputs)  # editing it re-runs prepare
n_shards = spec_of(lambda spec: int(spec.get("shards", 1)))
reader_of = spec_of(lambda spec: spec.get("reader", "generic"))
judge_kind = spec_of(judge_kind_for)
use_options_of = spec_of(lambda spec: bool(spec.get("use_options", False)))
generate_spec = spec_of(lambda spec: spec["generate"])
schedule = spec_of(interactive.schedule_of)
personas_source = spec_of(lambda spec: personas_file(spec["generate"]))
fb_loader = spec_of(lambda spec: spec["loader"])
fb_scoring = spec_of(scoring_of)  # MemoryBench's scoring protocol: paper | judge
fb_source = spec_of(fb.dialogue_source)
fb_set_name = spec_of(lambda spec: fb.set_name(spec.get("set") or spec.get("select")))
fb_dataset_configs = spec_of(lambda spec: spec["configs"])


#: Spec keys no loader reads (protocol settings, the systems list): editing one re-runs no prepare
PROTOCOL_KEYS = ("protocols", "feedback", "normalize", "scoring", "systems")
# the benchmark's spec as the loader sees it (without the protocol settings)
data_spec = spec_of(
    lambda spec: {k: v for k, v in spec.items() if k not in PROTOCOL_KEYS}
)


def system_spec(wildcards):
    # labels (published_as) are for comparisons: a job never reads them, a change re-runs nothing
    return without_labels(config["systems"][wildcards.system])


def previous_snapshot(folder):
    """Input function: step k builds on step k-1's snapshot in ``folder``; step 0 on none."""
    return lambda wildcards: layout.previous_snapshot(folder, dict(wildcards))


def run_seed(wildcards):
    """Params function: the run seed of the job's repeat (SEED in repeat 0)."""
    return folder_seed(wildcards.repeat, SEED)


def repeat_models(bindings, wildcards):
    """``bindings`` as the job's repeat calls them: in repeat k >= 1 each sampling role sends its
    own seed + k, so no repeat is served another's replies from the cache (mnemoflow/repeats.py).
    """
    return seeded_models(bindings, run_seed(wildcards), SEED)


def all_data_versions():
    """``data_version.json`` of every benchmark the static QA chain reads from prepare."""
    return [
        f"{PREPARED.format(benchmark=b)}/data_version.json"
        for b in config["run"]["benchmarks"]
        if "qa" in protocols_of(b, BENCHMARKS[b]) or BENCHMARKS[b].get("errata")
    ]


#: The run's summary files (the report reads them) and the report's.
SUMMARY, REPORT = layout.outputs("summarize", {}), layout.outputs("report", {})


def get_final_output():
    return [SUMMARY["summary"], SUMMARY["table"], REPORT["html"]]


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
    return played_by(MODELS, run_roles(config, BENCHMARKS) | set(MODELS))


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
    """The agent's binding and those of the roles the system calls while retrieving (an
    imported system's answers are read from its file: the agent's binding re-runs nothing).
    """
    spec = system_spec(wildcards)
    agent = () if spec.get("type") == IMPORTED else ("agent",)
    bindings = models(*agent, *stage_roles(spec, "query"))
    return repeat_models(bindings, wildcards)


def reader_inputs(wildcards):
    """Files the reader reads (an official retrieval log), so editing one re-runs answering."""
    path = retrieval_log_path(reader_of(wildcards))
    return [path] if path else []


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
            shard=range(n_shards(wildcards)),
        )

    return files


# --- judge panel and false-positive probe: `judge.panel` (mnemoflow/eval/static_qa/panel.py) ------

#: The panel's judges (none: the rules judge_panel and judge_probe have no job).
PANEL = public_panel(panel_of(config.get("judge"), config.get("endpoints")))
PROBE_SIZE, PROBE_SEED = probe_settings(config.get("judge"))
#: Every job of the run (mnemoflow/layout.py): the rules' target lists are queries of it.
GRID = layout.Grid(run_units(config, BENCHMARKS, REPEAT_FOLDERS, panel=bool(PANEL)))
DIALOGUES = ("dialogues", "replay_dialogues")


def repeat_scores(repeat):
    """The scores (and MemoryBench's normalized scores) of one repeat: the summary's spread."""
    normalized = GRID.files("normalized", "normalize", repeat=repeat)
    return GRID.step_files("scores.parquet", repeat) + normalized


def prepared_of_answers(name):
    """``name`` of every prepared benchmark the run answers questions of (static QA, feedback)."""
    answering = GRID.benchmarks("answer", "feedback_step", "feedback_train_performance")
    return [f"{PREPARED.format(benchmark=b)}/{name}" for b in answering]


def scored_step_files(name):
    """Output list: ``name`` in every interactive step folder, under the {repeat} wildcard."""
    return GRID.step_files(name, protocols=interactive.PROTOCOLS, wildcard=True)


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


# --- interactive protocols (AMemGym): `protocols: [interactive, interactive_replay]` ----------

ENVIRONMENT, ISHARD = layout.ENVIRONMENT, layout.RUN_SHARD


def environment_file(wildcards):
    """The benchmark's data.json: generated (generate_amemgym, environment), or source.path."""
    spec = benchmark_spec(wildcards)
    if spec.get("generate"):
        return ENVIRONMENT.format(benchmark=wildcards.benchmark)
    return spec["source"]["path"]


def replay_dialogues(wildcards):
    """The source system's on-policy transcripts of this period and shard, to memorize."""
    source = interactive.replay_source(benchmark_spec(wildcards))
    keys = {**dict(wildcards), "system": source, "protocol": interactive.PROTOCOL}
    return f"{ISHARD.format(**keys)}/dialogues.parquet"


# --- interactive scoring: one job per repeat (rule score_interactive) ---------------------------
# A step's AMemGym scoring is seconds of CPU, less than a job's start-up, so one job scores every
# interactive step of a repeat, each step into its own folder as before; a step's files and knobs
# travel in params.steps, the rule's input and output lists are their union. Static QA keeps a
# score job per step: its scoring reads every snapshot of the step (LongMemEval-S: seconds per
# system), which runs in parallel across systems and shards.


def interactive_scored_steps(wildcards):
    """Params function: every interactive step of the job's repeat, its files and knobs."""
    return scored_steps(GRID.units, wildcards.repeat, BENCHMARKS, environment_file)


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

GENERATED_USER = layout.GENERATED_USER


def benchmarks_generated_with(method):
    """A wildcard constraint matching exactly the benchmarks ``method`` generates (none: no match),
    so generate_amemgym and environment never both claim a data.json."""
    names = generated_with(BENCHMARKS, method)
    return "|".join(re.escape(name) for name in names) if names else "(?!)"


def generation_knobs(wildcards):
    """Every knob (resolved from the preset at startup), without the persona source."""
    spec = generate_spec(wildcards)
    return {k: v for k, v in spec.items() if k not in ("method", "preset", "personas")}


def stage_checkpoints(wildcards):
    return layout.fill(layout.GENERATION_STAGES, dict(wildcards))


def generated_users(wildcards):
    n = int(generate_spec(wildcards)["num_user_profiles"])
    return expand(
        f"{GENERATED_USER}.json", benchmark=wildcards.benchmark, user=range(n)
    )


# --- learning from feedback (MemoryBench): rules/feedback.smk ----------------------------------

FB_TRAIN_FILE = layout.output_patterns("feedback_train_dialogues")["dialogues"]
FB_PROTOCOLS = "|".join(fb.PROTOCOLS)
FB_BUILT = "|".join(p for p in fb.PROTOCOLS if fb.built_protocol(p) == p)


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


def fb_normalize_stats(wildcards):
    """The set's statistics file: ``normalize.stats``; under ``scoring: judge`` without one, the
    shipped 0-1 statistics of the upstream judge protocol (data/memorybench/)."""
    spec = benchmark_spec(wildcards)
    given = (spec.get("normalize") or {}).get("stats")
    where = f"config benchmarks.{wildcards.benchmark}.normalize.stats"
    return str(statistics_file(given, scoring_of(spec), where=where))


# --- the run's role bindings, checked once every helper above is defined -----------------------

# every role's endpoint; no role the run uses silently offline beside real models (the key
# variables are checked when a run starts: Snakefile's onstart; a dry run or plan needs none)
check_bindings(
    BINDINGS,
    used=run_roles(config, BENCHMARKS),
    allow_offline=config.get("allow_offline_roles", []),
    require_keys=False,
)
# Batch-API mode only for roles whose every rule in the run collects a job's requests
check_batch_rules(MODELS, {r: RULE_ROLES[r] for r in run_rules(config, BENCHMARKS)})
# every system the run uses installed (a product's extra: the pip install to run)
_systems = [
    layout.systems_of(config, BENCHMARKS, b) for b in config["run"]["benchmarks"]
]
check_installed(config["systems"], {s for each in _systems for s in each})
# a corrupt table or ledger under results/ is moved to results/quarantine/ and made again
# (docs/reliability.md "Corrupt outputs"); valid files stay as they are
sweep_results(workflow.is_main_process)
# budget_usd: a run whose plan (docs/plan.md) would cost more refuses to start; without it, nothing
check_budget(
    {**config, "models": MODELS}, workflow.is_main_process, model_rules=RULE_ROLES
)


# --- the report's per-question drill-down: rules/report.smk ---------------------------------


def interactive_environments():
    """benchmark -> its data.json, for every interactive benchmark of the run."""
    benchmarks = GRID.benchmarks("dialogues", "replay_dialogues")
    return {b: environment_file(SimpleNamespace(benchmark=b)) for b in benchmarks}
