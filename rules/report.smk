rule report:
    input:
        summary=SUMMARY["summary"],
        diagnosis=SUMMARY["diagnosis"],
        judgements=all_judgements() + all_feedback_step_files("judgements.parquet"),
        ledgers=all_ledgers() + all_repeat_ledgers(),
        generation=all_generation_reports(),
        answers=all_answers(),
        snapshots=all_snapshots(),
        questions=all_prepared("questions.parquet"),
        sessions=all_prepared("sessions.parquet"),
        question_scores=all_interactive_step_files("question_scores.parquet"),
        checkpoint_replies=all_interactive_shard_files("checkpoint_replies.parquet"),
        recall_replies=all_interactive_shard_files("recall_replies.parquet"),
        environments=list(interactive_environments().values()),
        published=published_tables(),
        versions=all_data_versions(),
        # `judge.panel` only (none without): the panel, the configured judge, the probe
        panel=all_panel_files("panel_judgements.parquet"),
        panel_configured=all_panel_files("judgements.parquet"),
        probes=all_probe_files("probe_judgements.parquet"),
        panel_ledgers=all_panel_files("panel.ledgers.json")
        + all_probe_files("panel.ledgers.json"),
    output:
        **outputs("report"),
    log:
        "results/logs/report.log",
    conda:
        "../envs/mnemoflow.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        config=report_config(),
        environments=interactive_environments(),
        published=published_request(),
        benchmarks=run_loaders(),
        code=code_version("mnemoflow.jobs.summary:report"),
    script:
        "../scripts/report.py"
