"""Rule score: one step's judgements, answers and snapshots (all shards) -> scores, diagnosis."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.score(
        judgements=list(sm.input.judgements),
        answers=list(sm.input.answers),
        snapshots=list(sm.input.snapshots),
        questions=sm.input.questions,
        sessions=sm.input.sessions,
        scores=sm.output.scores,
        question_scores=sm.output.question_scores,
        diagnosis=sm.output.diagnosis,
        **jobs.snakemake_params(sm.params),
    )
