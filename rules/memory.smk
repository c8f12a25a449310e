rule ingest:
    input:
        sessions=f"{PREPARED}/sessions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
        previous=previous_snapshot,
    output:
        snapshot=directory(f"{SHARD}/memory"),
        ledger=f"{SHARD}/ingest.ledger.json",
    log:
        "results/logs/{benchmark}/{system}/step{step}/shard{shard}/ingest.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        **endpoint_limits("memory_writer", "embedder").resources,
        mem_mb=4000,
        runtime=60,
    params:
        code=code_version("ingest"),
        system=ingest_system,
        n_shards=n_shards,
        models=ingest_models,
        limits=endpoint_limits("memory_writer", "embedder").params,
        seed=config.get("seed", 0),
    script:
        "../scripts/ingest.py"
