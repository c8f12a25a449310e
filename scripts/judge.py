"""Rule judge: answers + references -> judgements (JUDGEMENTS table)."""

from mnemoflow.jobs import run, static_qa

run(snakemake, static_qa.judge)  # noqa: F821  (snakemake is injected by Snakemake)
