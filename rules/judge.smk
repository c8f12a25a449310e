rule judge:
    input:
        questions=f"{PREPARED}/questions.parquet",
        answers=f"{SHARD}/answers.parquet",
    output:
        judgements=f"{SHARD}/judgements.parquet",
        ledger=f"{SHARD}/judgements.ledger.json",
        settings=f"{SHARD}/judge.json",
    log:
        f"{RLOGS}/{{system}}/qa/step{{step}}/shard{{shard}}/judge.log",
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


# Every static QA step of the run (of one repeat) in one job: each step's scoring is seconds of
# CPU, less than a job's start-up (rules/common.smk, scoring).
rule score:
    input:
        unpack(
            scored_inputs(
                static_scored_steps,
                ("judgements", "answers", "snapshots", "questions", "sessions"),
            )
        ),
    output:
        scores=scored_step_files(("qa",), "scores.parquet"),
        question_scores=scored_step_files(("qa",), "question_scores.parquet"),
        diagnosis=scored_step_files(("qa",), "diagnosis.parquet"),
    log:
        "results/logs/{repeat}score.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        steps=static_scored_steps,
        code=code_version("mnemoflow.jobs.static_qa:score"),
    script:
        "../scripts/score.py"
