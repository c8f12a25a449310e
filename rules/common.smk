# Config validation and every input / params helper of the workflow (rules stay declarative).
import re

from snakemake.utils import validate

from mnemoflow.codeversion import code_version
from mnemoflow.config_schema import check_config
from mnemoflow.data.registry import n_steps
from mnemoflow.data.sources import local_source_file
from mnemoflow.eval.judges import kind_for as judge_kind_for
from mnemoflow.llm.limits import endpoint_budgets, job_limits
from mnemoflow.llm.types import ROLES, check_bindings
from mnemoflow.memory.base import check_systems, stage_roles, stage_spec
from mnemoflow.protocols.registry import protocol_steps, protocols_of
from mnemoflow.protocols.static_qa import retrieval_log_path
from mnemoflow.jobs_interactive import replay_source, schedule_of
from mnemoflow.jobs_environment import (
    ROLES as GENERATOR_ROLES,
    generated_with,
    personas_file,
    resolve_generate,
)

# one-line errors naming the key first; snakemake's validate then fills in the defaults
check_config(config, workflow.source_path("../schemas/config.schema.yaml"))
validate(config, schema="../schemas/config.schema.yaml")
# generate: {method: llm} -> every knob (preset + overrides), checked
resolve_generate(config)

for _name in config["run"]["benchmarks"]:
    if _name not in config["benchmarks"]:
        raise ValueError(
            f"config run.benchmarks: {_name!r} is not defined under benchmarks"
        )
for _name in config["run"]["systems"]:
    if _name not in config["systems"]:
        raise ValueError(f"config run.systems: {_name!r} is not defined under systems")
check_systems(config["systems"])  # each system's parameters against its params_schema
check_bindings(config["models"])  # every role's endpoint, and its key variable is set
for _name in config["run"]["benchmarks"]:
    protocols_of(_name, config["benchmarks"][_name])  # known protocols only
    for _system in config["benchmarks"][_name].get("systems", []):
        if _system not in config["systems"]:
            raise ValueError(
                f"config benchmarks.{_name}.systems: {_system!r} is not defined under systems"
            )

PREPARED = "results/{benchmark}/prepared"
# Every protocol writes scores.parquet and diagnosis.parquet per step under RUN_STEP; the static
# QA chain (rules answer / judge / score) lives under STEP and SHARD, its protocol being "qa".
RUN_STEP = "results/{benchmark}/{system}/{protocol}/step{step}"
STEP = "results/{benchmark}/{system}/qa/step{step}"
SHARD = "results/{benchmark}/{system}/qa/step{step}/shard{shard}"


wildcard_constraints:
    benchmark=r"[A-Za-z0-9_.-]+",
    system=r"[A-Za-z0-9_.-]+",
    protocol=r"[A-Za-z0-9_]+",
    step=r"\d+",
    shard=r"\d+",


def benchmark_spec(wildcards):
    return config["benchmarks"][wildcards.benchmark]


#: Spec keys that shape the protocols, not the data: editing them must not re-run prepare.
PROTOCOL_KEYS = ("protocols", "feedback", "normalize")


def data_spec(wildcards):
    """The benchmark's spec as the loader sees it (without the protocol settings)."""
    spec = benchmark_spec(wildcards)
    return {k: v for k, v in spec.items() if k not in PROTOCOL_KEYS}


def benchmark_source(wildcards):
    """The benchmark's local source file (if it is one), so replacing it re-runs prepare."""
    return local_source_file(benchmark_spec(wildcards))


def system_spec(wildcards):
    return config["systems"][wildcards.system]


def ingest_system(wildcards):
    """The system's type and ingest-time parameters (a query-time change re-runs no ingest)."""
    return stage_spec(system_spec(wildcards), "ingest")


def query_system(wildcards):
    """The system's type and query-time parameters; the rest comes from the snapshot."""
    return stage_spec(system_spec(wildcards), "query")


def ingest_models(wildcards):
    """The bindings of the roles the system writes or embeds with while ingesting."""
    return models(*stage_roles(system_spec(wildcards), "ingest"))


def answer_models(wildcards):
    """The agent's binding and those of the roles the system calls while retrieving."""
    return models("agent", *stage_roles(system_spec(wildcards), "query"))


def n_shards(wildcards):
    return int(benchmark_spec(wildcards).get("shards", 1))


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


def cache_path():
    """The shared response cache; read by scripts, deliberately not a job input or param."""
    return config.get("cache", "results/cache/llm")


# Each model endpoint is a global resource whose budget is its concurrency (a --resources value wins);
# jobs that call it hold a share (endpoint_limits), so limits hold for the whole run (docs/gateway.md).
for _name, _budget in endpoint_budgets(config["models"]).items():
    if _name not in workflow.global_resources:
        workflow.register_resource(_name, _budget)


def endpoint_limits(*roles):
    """The job's share of the endpoints its roles call: .resources to declare, .params to pass."""
    return job_limits(config["models"], roles, config.get("endpoint_jobs", 4))


def protocols_for(benchmark):
    return protocols_of(benchmark, config["benchmarks"][benchmark])


def systems_for(benchmark):
    """The systems run on ``benchmark``: its own ``systems:`` list, else run.systems."""
    return config["benchmarks"][benchmark].get("systems", config["run"]["systems"])


def steps_of(benchmark, protocol="qa"):
    return range(protocol_steps(protocol, config["benchmarks"][benchmark]))


def shards_of(benchmark):
    return range(int(config["benchmarks"][benchmark].get("shards", 1)))


def models(*roles):
    """The bindings of the roles a job uses: a change to another role re-runs nothing here."""
    return {role: config["models"].get(role, {}) for role in roles}


def previous_snapshot(wildcards):
    """Step k builds on step k-1's snapshot of the same shard; step 0 starts empty."""
    step = int(wildcards.step)
    if step == 0:
        return []
    previous = SHARD.format(**{**dict(wildcards), "step": step - 1})
    return f"{previous}/memory"


def shard_files(name):
    """Input function: ``name`` in every shard of the job's (benchmark, system, step)."""

    def files(wildcards):
        return expand(
            f"{SHARD}/{name}",
            benchmark=wildcards.benchmark,
            system=wildcards.system,
            step=wildcards.step,
            shard=shards_of(wildcards.benchmark),
        )

    return files


def all_step_files(name):
    """``name`` in every (benchmark, system, protocol, step) folder of the run."""
    return [
        f"{RUN_STEP.format(benchmark=b, system=s, protocol=p, step=k)}/{name}"
        for b in config["run"]["benchmarks"]
        for s in systems_for(b)
        for p in protocols_for(b)
        for k in steps_of(b, p)
    ]


def all_runs():
    """(benchmark, system, step, shard) of every static QA job chain of the run."""
    return [
        dict(benchmark=b, system=s, step=k, shard=h)
        for b in config["run"]["benchmarks"]
        if "qa" in protocols_for(b)
        for s in systems_for(b)
        for k in steps_of(b)
        for h in shards_of(b)
    ]


def all_judgements():
    return [f"{SHARD.format(**run)}/judgements.parquet" for run in all_runs()]


def all_ledgers():
    return [
        f"{SHARD.format(**run)}/{name}.ledger.json"
        for run in all_runs()
        for name in ("ingest", "answers", "judgements")
    ] + all_interactive_ledgers()


def get_final_output():
    return ["results/summary.parquet", "results/summary.md", "results/report.html"]


# --- interactive protocols (AMemGym): `protocols: [interactive, interactive_replay]` ----------

ENVIRONMENT = "results/{benchmark}/environment/data.json"
ISHARD = "results/{benchmark}/{system}/{protocol}/step{step}/shard{shard}"
UPPER_BOUND = "results/{benchmark}/upper_bound"


def interactive_spec(wildcards):
    return benchmark_spec(wildcards).get("interactive", {})


def reference_upper_bound(wildcards):
    """Score the upper bound with the reference's state-tuple lookup (docs/interactive.md)."""
    return bool(interactive_spec(wildcards).get("reference_upper_bound", False))


def environment_file(wildcards):
    """The benchmark's data.json: generated (generate_amemgym, or the environment rule for
    `generate: {method: llm}`), or source.path."""
    spec = benchmark_spec(wildcards)
    if spec.get("generate"):
        return ENVIRONMENT.format(benchmark=wildcards.benchmark)
    return spec["source"]["path"]


def generate_spec(wildcards):
    return benchmark_spec(wildcards)["generate"]


# --- environments generated with a model (`generate: {method: llm}`, rules/environment.smk) ---

GENERATED_USER = "results/{benchmark}/environment/users/{user}"
GENERATION_REPORT = "results/{benchmark}/environment/generation_report.parquet"


def benchmarks_generated_with(method):
    """A wildcard constraint matching exactly the benchmarks ``method`` generates (none: no match),
    so generate_amemgym and environment never both claim a data.json."""
    names = generated_with(config, method)
    return "|".join(re.escape(name) for name in names) if names else "(?!)"


def generation_knobs(wildcards):
    """Every knob (the workflow resolved the preset at startup), without the persona source."""
    spec = dict(generate_spec(wildcards))
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


def all_generation_reports():
    return [
        GENERATION_REPORT.format(benchmark=b)
        for b in config["run"]["benchmarks"]
        if b in generated_with(config, "llm")
    ]


def all_generation_ledgers():
    return [
        f"{GENERATED_USER.format(benchmark=b, user=u)}.ledger.json"
        for b in config["run"]["benchmarks"]
        if b in generated_with(config, "llm")
        for u in range(int(config["benchmarks"][b]["generate"]["num_user_profiles"]))
    ]


def schedule(wildcards):
    return schedule_of(benchmark_spec(wildcards))


def previous_interactive_snapshot(wildcards):
    """Period k starts from the same run's snapshot after period k-1; period 0 from nothing."""
    step = int(wildcards.step)
    if step == 0:
        return []
    previous = ISHARD.format(**{**dict(wildcards), "step": step - 1})
    return f"{previous}/memory"


def replay_dialogues(wildcards):
    """The source system's on-policy transcripts of this period and shard, to memorize."""
    source = replay_source(benchmark_spec(wildcards))
    keys = {**dict(wildcards), "system": source, "protocol": "interactive"}
    shard = ISHARD.format(**keys)
    return f"{shard}/dialogues.parquet"


def interactive_files_upto(name):
    """Input function: ``name`` of every shard of steps 0..k of the job's run."""

    def files(wildcards):
        return expand(
            f"{ISHARD}/{name}",
            benchmark=wildcards.benchmark,
            system=wildcards.system,
            protocol=wildcards.protocol,
            step=range(int(wildcards.step) + 1),
            shard=shards_of(wildcards.benchmark),
        )

    return files


def all_interactive_ledgers():
    """Ledgers of the interactive runs (dialogues per shard, the upper bound per benchmark)."""
    runs = [
        (b, s, p)
        for b in config["run"]["benchmarks"]
        for p in protocols_for(b)
        if p in ("interactive", "interactive_replay")
        for s in systems_for(b)
    ]
    ledgers = [
        f"{ISHARD.format(benchmark=b, system=s, protocol=p, step=k, shard=h)}/dialogues.ledger.json"
        for b, s, p in runs
        for k in steps_of(b, p)
        for h in shards_of(b)
    ]
    benchmarks = sorted({b for b, _, _ in runs})
    return (
        ledgers
        + [f"{UPPER_BOUND.format(benchmark=b)}.ledger.json" for b in benchmarks]
        + all_generation_ledgers()
    )
