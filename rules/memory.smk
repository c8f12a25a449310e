rule ingest:
    input:
        sessions=PREPARED + "/sessions.parquet",
        episode_sessions=PREPARED + "/episode_sessions.parquet",
        previous=previous_snapshot,
    output:
        snapshot=directory(SHARD + "/memory"),
        ledger=SHARD + "/ingest.ledger.json",
    log:
        LOGS + "/{benchmark}/{system}/step{step}/shard{shard}/ingest.log",
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        system=system_spec,
        n_shards=n_shards,
        models=models("memory_writer", "embedder"),
        seed=config.get("seed", 0),
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/ingest.py"
