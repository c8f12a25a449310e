rule answer:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
        snapshot=f"{SHARD}/memory",
        reader_files=reader_inputs,
    output:
        answers=f"{SHARD}/answers.parquet",
        ledger=f"{SHARD}/answers.ledger.json",
    log:
        "results/logs/{benchmark}/{system}/step{step}/shard{shard}/answer.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("agent", "memory_writer", "embedder").resources,
        mem_mb=4000,
        runtime=120,
    params:
        code=code_version("answer"),
        system=query_system,
        n_shards=n_shards,
        reader=reader_of,
        use_options=use_options_of,
        models=answer_models,
        limits=endpoint_limits("agent", "memory_writer", "embedder").params,
        seed=config.get("seed", 0),
    script:
        "../scripts/answer.py"
