"""Rule report: summary, judgements and ledgers -> results/report.html (+ derived TSV/SVG)."""

from mnemoflow.jobs import run, summary

run(snakemake, summary.report)  # noqa: F821  (snakemake is injected by Snakemake)
