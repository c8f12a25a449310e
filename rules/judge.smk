rule judge:
    input:
        questions=f"{PREPARED}/questions.parquet",
        answers=f"{SHARD}/answers.parquet",
    output:
        judgements=f"{SHARD}/judgements.parquet",
        ledger=f"{SHARD}/judgements.ledger.json",
        settings=f"{SHARD}/judge.json",
    log:
        "results/logs/{benchmark}/{system}/step{step}/shard{shard}/judge.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("judge").resources,
        mem_mb=2000,
        runtime=60,
    params:
        code=code_version("judge"),
        kind=judge_kind,
        repeats=config.get("judge", {}).get("repeats", 1),
        seed=config.get("judge", {}).get("seed", 0),
        models=models("judge"),
        limits=endpoint_limits("judge").params,
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
        scores=f"{STEP}/scores.parquet",
        question_scores=f"{STEP}/question_scores.parquet",
        diagnosis=f"{STEP}/diagnosis.parquet",
    log:
        "results/logs/{benchmark}/{system}/step{step}/score.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        code=code_version("score"),
        kind=judge_kind,
    script:
        "../scripts/score.py"
