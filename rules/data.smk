rule prepare:
    input:
        source=benchmark_source,
        errata=benchmark_errata,
    output:
        **outputs("prepare"),
    log:
        f"{LOGS}/prepared/prepare.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=data_spec,
        code=code_version("mnemoflow.jobs.data:prepare"),
    script:
        "../scripts/prepare.py"
