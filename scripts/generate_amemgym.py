"""Rule generate_amemgym: a seeded procedural AMemGym environment -> data.json."""

from mnemoflow.jobs import interactive, run

run(snakemake, interactive.generate_environment)  # noqa: F821  (snakemake is injected by Snakemake)
