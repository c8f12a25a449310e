"""Rule feedback_step: step k's dialogues, memorized on snapshot k-1, the split answered, scored."""

from mnemoflow.jobs import feedback, run

run(snakemake, feedback.step)  # noqa: F821  (snakemake is injected by Snakemake)
