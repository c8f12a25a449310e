# AMemGym environments generated with a model (`generate: {method: llm, ...}`; docs/environment.md):
# one generate_user job per persona index (stage checkpoints under results/{benchmark}/environment/
# stages/{user}/, deliberately not outputs, so a rerun reuses them), then the environment rule
# gathers the users into data.json and generation_report.parquet.
# Logic: mnemoflow/jobs/environment.py and mnemoflow/environment/.


rule generate_user:
    input:
        personas=personas_source,
    output:
        **outputs("generate_user"),
    log:
        f"{LOGS}/environment/users/{{user}}.log",
    wildcard_constraints:
        benchmark=benchmarks_generated_with("llm"),
        user=r"\d+",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("generate_user").resources,
        mem_mb=2000,
        runtime=240,
    params:
        knobs=generation_knobs,
        checkpoints=stage_checkpoints,
        models=rule_models("generate_user"),
        limits=endpoint_limits("generate_user").params,
        code=code_version("mnemoflow.jobs.environment:generate_user"),
    script:
        "../scripts/generate_user.py"


rule environment:
    input:
        users=generated_users,
    output:
        **outputs("environment"),
    log:
        f"{LOGS}/environment/environment.log",
    wildcard_constraints:
        benchmark=benchmarks_generated_with("llm"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_version("mnemoflow.jobs.environment:environment"),
    script:
        "../scripts/environment.py"
