"""Rule report: summary, judgements and ledgers -> results/report.html (+ derived TSV/SVG)."""

from mnemoflow import jobs

sm = snakemake  # noqa: F821  (injected by Snakemake)
with jobs.job_log(sm.log[0]):
    jobs.report(
        summary=sm.input.summary,
        judgements=list(sm.input.judgements),
        ledgers=list(sm.input.ledgers),
        html=sm.output.html,
        diagnosis=sm.input.diagnosis,
        generation=list(sm.input.generation),
        config=jobs.snakemake_params(sm.params)["config"],
    )
