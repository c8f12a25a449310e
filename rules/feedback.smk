# Learning from user feedback (MemoryBench's protocols, mnemoflow/protocols/feedback.py):
# training dialogues -> one job per step (dialogues, ingest, answer, score) -> normalize.


rule feedback_train_dialogues:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        dialogues=f"{PREPARED}/dialogues.parquet",
    output:
        dialogues=FB_TRAIN_FILE,
        ledger=f"{FB_TRAIN}/train_dialogues.ledger.json",
    log:
        "results/logs/{benchmark}/{system}/feedback/train_dialogues.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits(
            "agent", "user", "judge", "memory_writer", "embedder"
        ).resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        source=fb_source,
        loader=fb_loader,
        settings=fb_generation,
        models=fb_generation_models,
        limits=endpoint_limits(
            "agent", "user", "judge", "memory_writer", "embedder"
        ).params,
        seed=config.get("seed", 0),
        code=code_version("mnemoflow.jobs_feedback:train_dialogues"),
    script:
        "../scripts/feedback_train_dialogues.py"


# One job per step (dialogues -> ingest -> answer -> score): a job costs seconds of start-up,
# a step of the offline default well under one.
rule feedback_step:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        train=fb_train_input,
        previous=fb_previous,
    output:
        dialogues=f"{FB_STEP}/dialogues.parquet",
        snapshot=directory(FB_MEMORY),
        answers=f"{FB_STEP}/answers.parquet",
        scores=f"{FB_STEP}/scores.parquet",
        question_scores=f"{FB_STEP}/question_scores.parquet",
        judgements=f"{FB_STEP}/judgements.parquet",
        diagnosis=f"{FB_STEP}/diagnosis.parquet",
        ledger=f"{FB_STEP}/step.ledger.json",
    log:
        f"{FB_LOGS}/step.log",
    wildcard_constraints:
        protocol=FB_BUILT,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits(
            "agent", "user", "judge", "memory_writer", "embedder"
        ).resources,
        mem_mb=4000,
        runtime=240,
    params:
        system=system_spec,
        loader=fb_loader,
        settings=fb_step_settings,
        models=fb_step_models,
        limits=endpoint_limits(
            "agent", "user", "judge", "memory_writer", "embedder"
        ).params,
        seed=config.get("seed", 0),
        code=code_version("mnemoflow.jobs_feedback:step"),
    script:
        "../scripts/feedback_step.py"


rule feedback_train_performance:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        snapshot=fb_step_path("memory"),
        dialogues=fb_step_path("dialogues.parquet"),
    output:
        answers=f"{FB_STEP}/answers.parquet",
        scores=f"{FB_STEP}/scores.parquet",
        question_scores=f"{FB_STEP}/question_scores.parquet",
        judgements=f"{FB_STEP}/judgements.parquet",
        diagnosis=f"{FB_STEP}/diagnosis.parquet",
        ledger=f"{FB_STEP}/step.ledger.json",
    log:
        f"{FB_LOGS}/step.log",
    wildcard_constraints:
        protocol="train_performance",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("agent", "judge", "memory_writer", "embedder").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        loader=fb_loader,
        settings=fb_answer_settings,
        models=fb_scoring_models(),
        limits=endpoint_limits("agent", "judge", "memory_writer", "embedder").params,
        seed=config.get("seed", 0),
        code=code_version("mnemoflow.jobs_feedback:train_performance"),
    script:
        "../scripts/feedback_train_performance.py"


rule normalize:
    input:
        question_scores=f"{FB_STEP}/question_scores.parquet",
        questions=f"{PREPARED}/questions.parquet",
        # inputs, not params: an edited statistics file or dataset config re-normalizes
        configs=lambda wildcards: benchmark_spec(wildcards)["configs"],
        stats=lambda wildcards: benchmark_spec(wildcards)["normalize"]["stats"],
    output:
        normalized=f"{FB_STEP}/normalized.parquet",
    log:
        f"{FB_LOGS}/normalize.log",
    wildcard_constraints:
        protocol=FB_ALL,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        set_name=fb_set_name,
        code=code_version("mnemoflow.jobs_feedback:normalize"),
    script:
        "../scripts/feedback_normalize.py"
