"""Rule score: one step's judgements, answers and snapshots (all shards) -> scores, diagnosis."""

from mnemoflow.jobs import run, static_qa

run(snakemake, static_qa.score)  # noqa: F821  (snakemake is injected by Snakemake)
