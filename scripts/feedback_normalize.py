"""Rule normalize: a domain / task set's official normalized scores (average, weighted, z)."""

from mnemoflow import jobs, jobs_feedback

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_feedback.normalize(
        question_scores=sm.input.question_scores,
        questions=sm.input.questions,
        configs=sm.input.configs,
        stats=sm.input.stats,
        out=sm.output.normalized,
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        protocol=sm.wildcards.protocol,
        step=int(sm.wildcards.step),
        **jobs.snakemake_params(sm.params),
    )
