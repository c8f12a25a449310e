"""Self-evolution (AMemGym's Table 3) from the summary table: per system with ``evolve``
configured, on-policy accuracy and memory score (mean over periods) and how often its types
section was rewritten. Pandas only, so summary.md is built without plotting libraries."""

from __future__ import annotations

import pandas as pd

ON_POLICY = "interactive"


def evolution_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (benchmark, system) whose on-policy run has self-evolution rows: accuracy and
    memory score (mean over periods, the last step's), ``periods_evolved`` (periods in which the
    section of at least one user changed) of ``periods``, ``users_changed`` (share of (user,
    period) rewrites that changed it) and ``unparsed`` (rewrites whose reply never parsed)."""
    rows = summary[summary["protocol"] == ON_POLICY]
    changed = rows[rows["metric"] == "section_changed"]
    if changed.empty:
        return pd.DataFrame()
    keys = ["benchmark", "system"]
    out = []
    for (benchmark, system), part in changed.groupby(keys, sort=True):
        run = rows[(rows["benchmark"] == benchmark) & (rows["system"] == system)]
        final = int(run["step"].max())

        def last(metric: str, run=run, final=final) -> float:
            value = run[
                (run["metric"] == metric)
                & (run["aggregate"] == "mean_over_periods")
                & (run["step"] == final)
            ]["value"]
            return float(value.iloc[0]) if len(value) else float("nan")

        per_period = part[part["aggregate"] == "micro"]
        unparsed = run[(run["metric"] == "evolution_unparsed") & (run["aggregate"] == "micro")]
        out.append(
            {
                "benchmark": benchmark,
                "system": system,
                "accuracy": last("accuracy"),
                "memory_score": last("memory_score"),
                "periods_evolved": int((per_period["value"] > 0).sum()),
                "periods": int(per_period["step"].nunique()),
                "users_changed": last("section_changed"),
                "unparsed": int(unparsed["value"].sum()),
            }
        )
    return pd.DataFrame(out)
