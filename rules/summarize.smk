rule summarize:
    input:
        scores=GRID.step_files("scores.parquet") + GRID.files("normalized", "normalize"),
        # repeats 1..N-1 (`repeats: N`): each metric's mean and sd across seeds; none without
        repeats=GRID.other_repeats(repeat_scores),
        diagnoses=GRID.step_files("diagnosis.parquet"),
        generation=GRID.files("report", "environment"),
        ledgers=GRID.ledgers() + GRID.other_repeats(GRID.ledgers),
        versions=all_data_versions(),
        published=published_tables(),
        # `judge.panel` only (none without): the panel, the configured judge, the probe
        panel=GRID.shard_files("panel_judgements.parquet", "judge_panel"),
        panel_configured=GRID.shard_files("judgements.parquet", "judge_panel"),
        probes=GRID.files("probe_judgements", "judge_probe"),
        panel_ledgers=GRID.files("ledger", "judge_panel", "judge_probe"),
        # the headline table's intervals, as report.html's
        judgements=GRID.files("judgements", "judge")
        + GRID.step_files("judgements.parquet", protocols=fb.PROTOCOLS),
    output:
        **outputs("summarize"),
    log:
        "results/logs/summarize.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        models=summary_models(),
        prices=user_prices(),
        published=published_request(),
        benchmarks=run_loaders(),
        code=code_version("mnemoflow.jobs.summary:summarize_runs"),
    script:
        "../scripts/summarize.py"
