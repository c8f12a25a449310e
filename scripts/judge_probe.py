"""Rule judge_probe: a benchmark's false-positive probe judged by every judge."""

from mnemoflow.jobs import panel, run

run(snakemake, panel.probe)  # noqa: F821  (snakemake is injected by Snakemake)
