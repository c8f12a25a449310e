rule judge:
    input:
        questions=f"{PREPARED}/questions.parquet",
        answers=f"{SHARD}/answers.parquet",
    output:
        judgements=f"{SHARD}/judgements.parquet",
        ledger=f"{SHARD}/judgements.ledger.json",
    log:
        "results/logs/{benchmark}/{system}/step{step}/shard{shard}/judge.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        models=models("judge"),
    script:
        "../scripts/judge.py"


rule score:
    input:
        judgements=shard_judgements,
    output:
        scores=f"{STEP}/scores.parquet",
    log:
        "results/logs/{benchmark}/{system}/step{step}/score.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/score.py"
