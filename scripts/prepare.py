"""Rule prepare: benchmark source -> unified sessions / questions / episode_sessions tables."""

from mnemoflow import jobs

with jobs.job_log(snakemake.log[0]):  # noqa: F821  (snakemake is injected by Snakemake)
    jobs.prepare(snakemake.params.spec, **dict(snakemake.output.items()))  # noqa: F821
