"""Rules dialogues / replay_dialogues: snapshot k-1 + period k -> dialogues, snapshot k, replies."""

from mnemoflow import jobs, jobs_interactive

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs_interactive.dialogues(
        environment=sm.input.environment,
        previous=sm.input.previous or None,
        source=sm.input.get("source"),
        benchmark=sm.wildcards.benchmark,
        system_name=sm.wildcards.system,
        protocol=sm.wildcards.protocol,
        step=int(sm.wildcards.step),
        shard=int(sm.wildcards.shard),
        cache=sm.config.get("cache"),
        **dict(sm.output.items()),
        **jobs.snakemake_params(sm.params),
    )
