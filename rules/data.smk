rule prepare:
    input:
        source=benchmark_source,
    output:
        sessions=f"{PREPARED}/sessions.parquet",
        questions=f"{PREPARED}/questions.parquet",
        episode_sessions=f"{PREPARED}/episode_sessions.parquet",
    log:
        "results/logs/{benchmark}/prepare.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=benchmark_spec,
    script:
        "../scripts/prepare.py"
