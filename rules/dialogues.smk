# Interactive protocols (AMemGym; `protocols: [interactive, interactive_replay]`): the live
# dialogues rule converses period k from step k-1's memory; replay_dialogues memorizes another
# system's transcripts instead. score_interactive writes every step's scores and diagnosis.
# evolution.parquet: self-evolving AWI's section rewrites (empty unless the system sets evolve).
# Logic: mnemoflow/jobs/interactive.py and mnemoflow/protocols/interactive.py.


rule generate_amemgym:
    input:
        # the generator's templates and persona pool: editing them re-generates
        topics=shipped_path(TOPICS),
        personas=shipped_path(PERSONAS),
    output:
        **outputs("generate_amemgym"),
    log:
        f"{LOGS}/environment/generate_amemgym.log",
    wildcard_constraints:
        benchmark=benchmarks_generated_with("procedural"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        spec=generate_spec,
        code=code_version("mnemoflow.jobs.interactive:generate_environment"),
    script:
        "../scripts/generate_amemgym.py"


rule dialogues:
    input:
        environment=environment_file,
        previous=previous_snapshot(ISHARD),
    output:
        **outputs("dialogues"),
    log:
        layout.log(layout.RUN_SHARD, "dialogues"),
    wildcard_constraints:
        protocol=interactive.PROTOCOL,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("dialogues").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        n_shards=n_shards,
        schedule=schedule,
        models=sampled_models("dialogues"),
        limits=endpoint_limits("dialogues").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.interactive:dialogues"),
    script:
        "../scripts/dialogues.py"


rule replay_dialogues:
    input:
        environment=environment_file,
        previous=previous_snapshot(ISHARD),
        source=replay_dialogues,
    output:
        **outputs("replay_dialogues"),
    log:
        layout.log(layout.RUN_SHARD, "dialogues"),
    wildcard_constraints:
        protocol=interactive.REPLAY,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("replay_dialogues").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        n_shards=n_shards,
        schedule=schedule,
        models=sampled_models("replay_dialogues"),
        limits=endpoint_limits("replay_dialogues").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.interactive:dialogues"),
    script:
        "../scripts/dialogues.py"


rule upper_bound:
    input:
        environment=environment_file,
    output:
        **outputs("upper_bound"),
    log:
        f"{RLOGS}/upper_bound.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("upper_bound").resources,
        mem_mb=2000,
        runtime=60,
    params:
        schedule=schedule,
        models=sampled_models("upper_bound"),
        limits=endpoint_limits("upper_bound").params,
        code=code_version("mnemoflow.jobs.interactive:upper_bound"),
    script:
        "../scripts/upper_bound.py"


# One job scores every interactive step of a repeat (rules/common.smk, interactive scoring).
rule score_interactive:
    input:
        unpack(
            scored_inputs(
                interactive_scored_steps,
                ("environment", "replies", "recall", "upper", "evolution"),
            )
        ),
    output:
        scores=scored_step_files("scores.parquet"),
        question_scores=scored_step_files("question_scores.parquet"),
        diagnosis=scored_step_files("diagnosis.parquet"),
        period_scores=scored_step_files("period_scores.parquet"),
    log:
        "results/logs/{repeat}score_interactive.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        steps=interactive_scored_steps,
        code=code_version("mnemoflow.jobs.interactive:score"),
    script:
        "../scripts/score_interactive.py"
