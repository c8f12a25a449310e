"""Rule upper_bound: every (user, question, option) asked with the option's state, no memory."""

from mnemoflow import jobs, jobs_interactive

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_interactive.upper_bound(
        environment=sm.input.environment,
        replies=sm.output.replies,
        ledger=sm.output.ledger,
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
