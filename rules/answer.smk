rule answer:
    input:
        questions=f"{PREPARED}/questions.parquet",
        sessions=f"{PREPARED}/sessions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
        snapshot=f"{SHARD}/memory",
        reader_files=reader_inputs,
    output:
        **outputs("answer"),
    log:
        layout.log(SHARD, "answer"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("answer").resources,
        mem_mb=4000,
        runtime=120,
    params:
        system=query_system,
        n_shards=n_shards,
        reader=reader_of,
        use_options=use_options_of,
        models=answer_models,
        limits=endpoint_limits("answer").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.static_qa:answer"),
    script:
        "../scripts/answer.py"
