"""Rule judge_panel: a shard's answers judged by every judge of judge.panel."""

from mnemoflow.jobs import panel, run

run(snakemake, panel.panel)  # noqa: F821  (snakemake is injected by Snakemake)
