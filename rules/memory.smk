rule ingest:
    input:
        sessions=f"{PREPARED}/sessions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
        previous=previous_snapshot(SHARD),
    output:
        snapshot=directory(f"{SHARD}/memory"),
        ledger=f"{SHARD}/ingest.ledger.json",
    log:
        f"{LOGS}/{{system}}/qa/step{{step}}/shard{{shard}}/ingest.log",
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
        seed=config.get("seed", 0),
        code=code_version("mnemoflow.jobs.static_qa:ingest"),
    script:
        "../scripts/ingest.py"
