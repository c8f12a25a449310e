"""Rule generate_amemgym: a seeded procedural AMemGym environment -> data.json."""

from mnemoflow import jobs, jobs_interactive

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_interactive.generate_environment(
        out=sm.output.environment, **jobs.snakemake_params(sm.params)["spec"]
    )
