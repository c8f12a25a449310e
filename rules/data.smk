rule prepare:
    output:
        sessions=PREPARED + "/sessions.parquet",
        questions=PREPARED + "/questions.parquet",
        episode_sessions=PREPARED + "/episode_sessions.parquet",
    log:
        LOGS + "/{benchmark}/prepare.log",
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=benchmark_spec,
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/prepare.py"
