"""Rule normalize: a domain / task set's official normalized scores (average, weighted, z)."""

from mnemoflow.jobs import feedback, run

run(snakemake, feedback.normalize)  # noqa: F821  (snakemake is injected by Snakemake)
