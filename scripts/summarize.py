"""Rule summarize: every run's scores and diagnosis -> results/summary.{parquet,md}, diagnosis."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.summarize_runs(
        scores=list(sm.input.scores),
        diagnoses=list(sm.input.diagnoses),
        summary=sm.output.summary,
        diagnosis=sm.output.diagnosis,
        table=sm.output.table,
        generation=list(sm.input.generation),
    )
