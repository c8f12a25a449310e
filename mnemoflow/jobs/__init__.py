"""The glue between the workflow's rules and the library: one module per rule group.

A job reads its rule's input files, calls the library (protocols, eval, environment), and writes
its outputs atomically with the gateway's ledger beside them; a failed job leaves nothing that
looks finished. Every job has the shape ``job(files, run, env, **params)`` (see
:mod:`mnemoflow.jobs.context`), and every script in ``scripts/`` is one call of :func:`run`.
Nothing in the library imports this package, and the rules never import it at parse time.

    data          prepare                                  (rules/data.smk)
    static_qa     ingest, answer, judge, score             (rules/memory, answer, judge.smk)
    panel         panel, probe (judge.panel)               (rules/judge.smk)
    feedback      train_dialogues, step, train_performance, normalize   (rules/feedback.smk)
    interactive   generate_environment, dialogues, upper_bound, score   (rules/dialogues.smk)
    environment   generate_user, environment               (rules/environment.smk)
    summary       summarize_runs, report                   (rules/summarize.smk, report.smk)
"""

from mnemoflow.jobs.context import JobEnv, RunKeys, run

__all__ = ["JobEnv", "RunKeys", "run"]
