"""Rule feedback_train_performance: the training split asked of the off-policy memory."""

from mnemoflow.jobs import feedback, run

run(snakemake, feedback.train_performance)  # noqa: F821  (snakemake is injected by Snakemake)
