"""Rule feedback_train_performance: the training split asked of the off-policy memory."""

from mnemoflow import jobs, jobs_feedback

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_feedback.train_performance(
        questions=sm.input.questions,
        sessions=sm.input.sessions,
        snapshot=sm.input.snapshot,
        dialogues=sm.input.dialogues,
        out=dict(sm.output.items()),
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
