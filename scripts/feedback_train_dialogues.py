"""Rule feedback_train_dialogues: the set's training dialogues (from the data or generated)."""

from mnemoflow.jobs import feedback, run

run(snakemake, feedback.train_dialogues)  # noqa: F821  (snakemake is injected by Snakemake)
