"""Rule ingest: step k-1's memory snapshot + step k's sessions -> step k's snapshot."""

from mnemoflow.jobs import run, static_qa

run(snakemake, static_qa.ingest)  # noqa: F821  (snakemake is injected by Snakemake)
