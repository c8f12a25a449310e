rule judge:
    input:
        questions=PREPARED + "/questions.parquet",
        answers=SHARD + "/answers.parquet",
    output:
        judgements=SHARD + "/judgements.parquet",
        ledger=SHARD + "/judgements.ledger.json",
    log:
        LOGS + "/{benchmark}/{system}/step{step}/shard{shard}/judge.log",
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        models=models("judge"),
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/judge.py"


rule score:
    input:
        judgements=shard_judgements,
    output:
        scores=STEP + "/scores.parquet",
    log:
        LOGS + "/{benchmark}/{system}/step{step}/score.log",
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/score.py"
