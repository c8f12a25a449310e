rule summarize:
    input:
        scores=all_scores(),
    output:
        summary="results/summary.parquet",
        table="results/summary.md",
    log:
        "results/logs/summarize.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/summarize.py"
