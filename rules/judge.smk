rule judge:
    input:
        questions=f"{PREPARED}/questions.parquet",
        answers=f"{SHARD}/answers.parquet",
        # names the answers that failed (a prompt over the context window): left unscored
        answers_ledger=f"{SHARD}/answers.ledger.json",
    output:
        **outputs("judge"),
    log:
        layout.log(SHARD, "judge"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("judge").resources,
        mem_mb=2000,
        runtime=60,
    params:
        kind=judge_kind,
        repeats=judge_setting("repeats", 1),
        models=rule_models("judge"),
        limits=endpoint_limits("judge").params,
        seed=judge_setting("seed", 0),  # the judge's own seed, not the run's
        code=code_version("mnemoflow.jobs.static_qa:judge"),
    script:
        "../scripts/judge.py"


rule score:
    input:
        judgements=shard_files("judgements.parquet"),
        answers=shard_files("answers.parquet"),
        snapshots=shard_files("memory"),
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
    output:
        **outputs("score"),
    log:
        layout.log(STEP, "score"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        kind=judge_kind,
        code=code_version("mnemoflow.jobs.static_qa:score"),
    script:
        "../scripts/score.py"


# `judge.panel` only (docs/metrics.md "Judge panel"): without it neither rule has a job.
rule judge_panel:
    input:
        questions=f"{PREPARED}/questions.parquet",
        answers=f"{SHARD}/answers.parquet",
    output:
        **outputs("judge_panel"),
    log:
        layout.log(SHARD, "judge_panel"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **panel_limits().resources,
        mem_mb=2000,
        runtime=60,
    params:
        panel=panel_params(),
        limits=panel_limits().params,
        seed=judge_setting("seed", 0),
        code=code_version("mnemoflow.jobs.panel:panel"),
    script:
        "../scripts/judge_panel.py"


rule judge_probe:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
    output:
        **outputs("judge_probe"),
    log:
        f"{LOGS}/probe/judge_probe.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **panel_limits(with_configured=True).resources,
        mem_mb=2000,
        runtime=60,
    params:
        panel=panel_params(),
        configured=configured_judge,
        size=PROBE_SIZE,
        limits=panel_limits(with_configured=True).params,
        seed=PROBE_SEED,
        code=code_version("mnemoflow.jobs.panel:probe"),
    script:
        "../scripts/judge_probe.py"
