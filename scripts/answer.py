"""Rule answer: questions of this step + memory snapshot -> answers (ANSWERS table)."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    params = jobs.snakemake_params(sm.params)
    jobs.answer(
        questions=sm.input.questions,
        sessions=sm.input.sessions,
        episode_sessions=sm.input.episode_sessions,
        snapshot=sm.input.snapshot,
        answers=sm.output.answers,
        ledger=sm.output.ledger,
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        step=int(sm.wildcards.step),
        shard=int(sm.wildcards.shard),
        cache=sm.config.get("cache"),
        **params,
    )
