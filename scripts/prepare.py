"""Rule prepare: benchmark source -> unified sessions / questions / episode_sessions tables."""

from mnemoflow.jobs import data, run

run(snakemake, data.prepare)  # noqa: F821  (snakemake is injected by Snakemake)
