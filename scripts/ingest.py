"""Rule ingest: step k-1's memory snapshot + step k's sessions -> step k's snapshot."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.ingest(
        sessions=sm.input.sessions,
        episode_sessions=sm.input.episode_sessions,
        previous=sm.input.previous or None,
        snapshot=sm.output.snapshot,
        ledger=sm.output.ledger,
        step=int(sm.wildcards.step),
        shard=int(sm.wildcards.shard),
        cache=sm.config.get("cache"),
        **jobs.snakemake_params(sm.params),
    )
