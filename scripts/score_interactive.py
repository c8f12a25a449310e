"""Rule score_interactive: replies of periods 0..k + upper bound -> step k's scores."""

from mnemoflow.jobs import interactive, run

run(snakemake, interactive.score)  # noqa: F821  (snakemake is injected by Snakemake)
