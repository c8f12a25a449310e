rule ingest:
    input:
        sessions=f"{PREPARED}/sessions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
        previous=previous_snapshot(SHARD),
    output:
        **outputs("ingest"),
    log:
        layout.log(SHARD, "ingest"),
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("ingest").resources,
        mem_mb=4000,
        runtime=60,
    params:
        system=ingest_system,
        n_shards=n_shards,
        models=ingest_models,
        limits=endpoint_limits("ingest").params,
        seed=run_seed,
        code=code_version("mnemoflow.jobs.static_qa:ingest"),
    script:
        "../scripts/ingest.py"
