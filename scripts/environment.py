"""Rule environment: the generated users -> data.json and generation_report.parquet."""

from mnemoflow.jobs import environment, run

run(snakemake, environment.environment)  # noqa: F821  (snakemake is injected by Snakemake)
