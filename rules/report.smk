rule report:
    input:
        summary=SUMMARY["summary"],
        diagnosis=SUMMARY["diagnosis"],
        judgements=GRID.files("judgements", "judge")
        + GRID.step_files("judgements.parquet", protocols=fb.PROTOCOLS),
        ledgers=GRID.ledgers() + GRID.other_repeats(GRID.ledgers),
        generation=GRID.files("report", "environment"),
        answers=GRID.files("answers", "answer")
        + GRID.step_files("answers.parquet", protocols=fb.PROTOCOLS),
        snapshots=GRID.files("snapshot", "ingest"),
        questions=prepared_of_answers("questions.parquet"),
        sessions=prepared_of_answers("sessions.parquet"),
        question_scores=GRID.step_files(
            "question_scores.parquet", protocols=interactive.PROTOCOLS
        ),
        checkpoint_replies=GRID.shard_files(
            "checkpoint_replies.parquet", *DIALOGUES, by_protocol=True
        ),
        recall_replies=GRID.shard_files(
            "recall_replies.parquet", *DIALOGUES, by_protocol=True
        ),
        environments=list(interactive_environments().values()),
        published=published_tables(),
        versions=all_data_versions(),
        # `judge.panel` only (none without): the panel, the configured judge, the probe
        panel=GRID.shard_files("panel_judgements.parquet", "judge_panel"),
        panel_configured=GRID.shard_files("judgements.parquet", "judge_panel"),
        probes=GRID.files("probe_judgements", "judge_probe"),
        panel_ledgers=GRID.files("ledger", "judge_panel", "judge_probe"),
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
