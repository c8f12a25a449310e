"""Rule generate_user: one persona through the generation chain -> its data.json user or failure."""

from mnemoflow.jobs import environment, run

run(snakemake, environment.generate_user)  # noqa: F821  (snakemake is injected by Snakemake)
