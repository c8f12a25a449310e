rule answer:
    input:
        questions=PREPARED + "/questions.parquet",
        snapshot=SHARD + "/memory",
    output:
        answers=SHARD + "/answers.parquet",
        ledger=SHARD + "/answers.ledger.json",
    log:
        LOGS + "/{benchmark}/{system}/step{step}/shard{shard}/answer.log",
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        system=system_spec,
        n_shards=n_shards,
        reader=reader_of,
        use_options=use_options_of,
        models=models("agent", "memory_writer", "embedder"),
        seed=config.get("seed", 0),
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/answer.py"
