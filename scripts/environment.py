"""Rule environment: the generated users -> data.json and generation_report.parquet."""

from mnemoflow import jobs, jobs_environment

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_environment.environment(
        users=list(sm.input.users),
        benchmark=sm.wildcards.benchmark,
        data=sm.output.data,
        report=sm.output.report,
    )
