"""Rule answer: questions of this step + memory snapshot -> answers (ANSWERS table)."""

from mnemoflow.jobs import run, static_qa

run(snakemake, static_qa.answer)  # noqa: F821  (snakemake is injected by Snakemake)
