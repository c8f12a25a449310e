# Config validation and every input / params helper of the workflow (rules stay declarative).
from snakemake.utils import validate

from mnemoflow.data.registry import n_steps
from mnemoflow.data.sources import local_source_file
from mnemoflow.eval.judges import kind_for as judge_kind_for
from mnemoflow.llm.types import ROLES
from mnemoflow.memory.base import check_systems
from mnemoflow.protocols.registry import protocol_steps, protocols_of
from mnemoflow.protocols.static_qa import retrieval_log_path

validate(config, schema="../schemas/config.schema.yaml")

for _name in config["run"]["benchmarks"]:
    if _name not in config["benchmarks"]:
        raise ValueError(
            f"config run.benchmarks: {_name!r} is not defined under benchmarks"
        )
for _name in config["run"]["systems"]:
    if _name not in config["systems"]:
        raise ValueError(f"config run.systems: {_name!r} is not defined under systems")
check_systems(config["systems"])  # each system's parameters against its params_schema
for _name in config["run"]["benchmarks"]:
    protocols_of(_name, config["benchmarks"][_name])  # known protocols only

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
    return config.get("cache", "results/cache/llm.sqlite")


def protocols_for(benchmark):
    return protocols_of(benchmark, config["benchmarks"][benchmark])


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
        for s in config["run"]["systems"]
        for p in protocols_for(b)
        for k in steps_of(b, p)
    ]


def all_runs():
    """(benchmark, system, step, shard) of every static QA job chain of the run."""
    return [
        dict(benchmark=b, system=s, step=k, shard=h)
        for b in config["run"]["benchmarks"]
        if "qa" in protocols_for(b)
        for s in config["run"]["systems"]
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
    ]


def get_final_output():
    return ["results/summary.parquet", "results/summary.md", "results/report.html"]
