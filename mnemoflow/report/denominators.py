"""An accuracy both ways: over the items that were scored and over all items (unscored ones
counted wrong), with the number unscored, from the ``<metric>:scored`` / ``:all`` /
``:unscored`` summary rows (docs/tables.md)."""

from __future__ import annotations

import pandas as pd


def denominator_table(rows: pd.DataFrame, metric: str, aggregate: str) -> pd.DataFrame:
    """Per (system, protocol), at its last step: ``metric`` over the scored items, over all items
    (unscored ones counted wrong) and the number unscored, from the ``<metric>:scored`` /
    ``:all`` / ``:unscored`` rows with ``aggregate``; empty when the run has none."""
    names = {f"{metric}:scored": "scored items", f"{metric}:all": "all items"}
    names[f"{metric}:unscored"] = "unscored"
    part = rows[rows["metric"].isin(names) & (rows["aggregate"] == aggregate)]
    if part.empty:
        return pd.DataFrame()
    keys = ["system", "protocol"]
    last = part[part["step"] == part.groupby(keys)["step"].transform("max")]
    table = last.pivot_table(index=[*keys, "step"], columns="metric", values="value")
    table = table.rename(columns=names).reset_index()
    if "unscored" in table.columns:
        table["unscored"] = table["unscored"].map(lambda v: "–" if pd.isna(v) else str(int(v)))
    order = [*keys, "step", "scored items", "all items", "unscored"]
    return table[[c for c in order if c in table.columns]]
