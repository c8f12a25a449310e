rule summarize:
    input:
        scores=all_scores(),
    output:
        summary=RESULTS + "/summary.parquet",
        table=RESULTS + "/summary.md",
    log:
        LOGS + "/summarize.log",
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/mnemoflow.yaml"
    script:
        "../scripts/summarize.py"
