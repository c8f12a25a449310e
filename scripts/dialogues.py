"""Rules dialogues / replay_dialogues: snapshot k-1 + period k -> dialogues, snapshot k, replies."""

from mnemoflow.jobs import interactive, run

run(snakemake, interactive.dialogues)  # noqa: F821  (snakemake is injected by Snakemake)
