"""Rule summarize: every run's scores -> results/summary.parquet and results/summary.md."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.summarize_runs(
        scores=list(sm.input.scores), summary=sm.output.summary, table=sm.output.table
    )
