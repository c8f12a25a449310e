"""Rule score: all shards' judgements of one step -> scores (SCORES table)."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.score(
        judgements=list(sm.input.judgements),
        scores=sm.output.scores,
        benchmark=sm.wildcards.benchmark,
        system=sm.wildcards.system,
        step=int(sm.wildcards.step),
    )
