"""``mnemoflow plan``: a run's model calls, tokens, dollars and hours, before it starts.

- :mod:`~mnemoflow.planning.plan`: the plan's lines (one per benchmark x system x protocol x
  role/task), totals with the ledger's own names, prices, wall time, the table and the JSON;
- :mod:`~mnemoflow.planning.static_qa`: the static QA chain (ingest / answer / judge), prompts
  rendered with the readers' and judges' own request builders;
- :mod:`~mnemoflow.planning.run`: a whole run from its config (and, from the command, the jobs
  a Snakemake dry run lists), and ``budget_usd``, checked when the workflow is parsed.

It calls no model: a prompt's reply is known only when the response cache holds it.
"""
