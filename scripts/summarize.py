"""Rule summarize: every run's scores and diagnosis -> results/summary.{parquet,md}, diagnosis."""

from mnemoflow.jobs import run, summary

run(snakemake, summary.summarize_runs)  # noqa: F821  (snakemake is injected by Snakemake)
