"""Rule feedback_step: step k's dialogues, memorized on snapshot k-1, the split answered, scored."""

from mnemoflow import jobs, jobs_feedback

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_feedback.step(
        questions=sm.input.questions,
        sessions=sm.input.sessions,
        train=sm.input.train or None,
        previous=sm.input.previous or None,
        out=dict(sm.output.items()),
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        protocol=sm.wildcards.protocol,
        step=int(sm.wildcards.step),
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
