"""Rule generate_user: one persona through the generation chain -> its data.json user or failure."""

from mnemoflow import jobs, jobs_environment

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_environment.generate_user(
        personas=sm.input.personas,
        user=int(sm.wildcards.user),
        out=sm.output.user,
        ledger=sm.output.ledger,
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
