"""Rule score_interactive: replies of periods 0..k + upper bound -> step k's scores."""

from mnemoflow import jobs, jobs_interactive

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_interactive.score(
        environment=sm.input.environment,
        replies=list(sm.input.replies),
        recall=list(sm.input.recall),
        upper=sm.input.upper,
        evolution=list(sm.input.evolution),
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        protocol=sm.wildcards.protocol,
        step=int(sm.wildcards.step),
        **dict(sm.output.items()),
        **jobs.snakemake_params(sm.params),
    )
