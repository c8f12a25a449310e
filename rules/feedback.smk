# Learning from user feedback (MemoryBench's protocols, mnemoflow/protocols/feedback.py):
# training dialogues -> one job per step (dialogues, ingest, answer, score) -> normalize.
# Logic: mnemoflow/jobs/feedback.py; each rule passes only the feedback settings its stage reads.


rule feedback_train_dialogues:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        recorded=f"{PREPARED}/dialogues.parquet",
    output:
        **outputs("feedback_train_dialogues"),
    log:
        layout.log(layout.FEEDBACK_TRAIN, "train_dialogues"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("feedback_train_dialogues").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        source=fb_source,
        loader=fb_loader,
        scoring=fb_scoring,
        settings=fb_stage_settings("train_dialogues"),
        models=fb_models("train_dialogues"),
        limits=endpoint_limits("feedback_train_dialogues").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.feedback:train_dialogues"),
    script:
        "../scripts/feedback_train_dialogues.py"


# One job per step (dialogues -> ingest -> answer -> score): a job costs seconds of start-up,
# a step of the offline default well under one.
rule feedback_step:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        train=fb_train_input,
        previous=previous_snapshot(RUN_STEP),
    output:
        **outputs("feedback_step"),
    log:
        layout.log(RUN_STEP, "step"),
    wildcard_constraints:
        protocol=FB_BUILT,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("feedback_step").resources,
        mem_mb=4000,
        runtime=240,
    params:
        system=system_spec,
        loader=fb_loader,
        scoring=fb_scoring,
        settings=fb_stage_settings("step"),
        models=fb_models("step"),
        limits=endpoint_limits("feedback_step").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.feedback:step"),
    script:
        "../scripts/feedback_step.py"


rule feedback_train_performance:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        snapshot=fb_step_path("memory"),
        dialogues=fb_step_path("dialogues.parquet"),
    output:
        **outputs("feedback_train_performance"),
    log:
        layout.log(RUN_STEP, "step"),
    wildcard_constraints:
        protocol="train_performance",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("feedback_train_performance").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        loader=fb_loader,
        scoring=fb_scoring,
        settings=fb_stage_settings("train_performance"),
        models=fb_models("train_performance"),
        limits=endpoint_limits("feedback_train_performance").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.feedback:train_performance"),
    script:
        "../scripts/feedback_train_performance.py"


rule normalize:
    input:
        question_scores=f"{RUN_STEP}/question_scores.parquet",
        questions=f"{PREPARED}/questions.parquet",
        # inputs, not params: an edited statistics file or dataset config re-normalizes
        configs=fb_dataset_configs,
        stats=fb_normalize_stats,
    output:
        **outputs("normalize"),
    log:
        layout.log(RUN_STEP, "normalize"),
    wildcard_constraints:
        protocol=FB_PROTOCOLS,
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        set_name=fb_set_name,
        code=code_version("mnemoflow.jobs.feedback:normalize"),
    script:
        "../scripts/feedback_normalize.py"
