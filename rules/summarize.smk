rule summarize:
    input:
        scores=all_step_files("scores.parquet") + all_normalized(),
        # repeats 1..N-1 (`repeats: N`): each metric's mean and sd across seeds; none without
        repeats=all_repeat_scores(),
        diagnoses=all_step_files("diagnosis.parquet"),
        generation=all_generation_reports(),
        ledgers=all_ledgers() + all_repeat_ledgers(),
        versions=all_data_versions(),
        published=published_tables(),
        # `judge.panel` only (none without): the panel, the configured judge, the probe
        panel=all_panel_files("panel_judgements.parquet"),
        panel_configured=all_panel_files("judgements.parquet"),
        probes=all_probe_files("probe_judgements.parquet"),
        panel_ledgers=all_panel_files("panel.ledgers.json")
        + all_probe_files("panel.ledgers.json"),
        # the headline table's intervals, as report.html's
        judgements=all_judgements() + all_feedback_step_files("judgements.parquet"),
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
