"""Rule score_interactive: every interactive step k's replies of periods 0..k -> its scores."""

from mnemoflow.jobs import interactive, run

run(snakemake, interactive.score)  # noqa: F821  (snakemake is injected by Snakemake)
