"""Rule feedback_train_dialogues: the set's training dialogues (from the data or generated)."""

from mnemoflow import jobs, jobs_feedback

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_feedback.train_dialogues(
        questions=sm.input.questions,
        sessions=sm.input.sessions,
        dialogues=sm.input.dialogues,
        out=sm.output.dialogues,
        ledger=sm.output.ledger,
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
