"""Rule upper_bound: every (user, question, option) asked with the option's state, no memory."""

from mnemoflow.jobs import interactive, run

run(snakemake, interactive.upper_bound)  # noqa: F821  (snakemake is injected by Snakemake)
