"""Rule judge: answers + references -> judgements (JUDGEMENTS table)."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.judge(
        questions=sm.input.questions,
        answers=sm.input.answers,
        judgements=sm.output.judgements,
        ledger=sm.output.ledger,
        settings=sm.output.settings,
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
