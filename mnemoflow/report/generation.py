"""The environment-generation section of summary.md and report.html, from generation_report tables.

Per benchmark and stage: how many users ran it, the model calls, validation failures and
refinements it took, and how many users took it from a checkpoint (reused: no model call). Then
every user that failed, with the stage and the reason: a failed user is not in data.json, and
the report says so instead of leaving it out silently.
"""

from __future__ import annotations

import pandas as pd

from mnemoflow.data.tables import GENERATION_REPORT

STAGE_COLUMNS = ["benchmark", "stage", "users", "calls", "validation_failures", "refinements"]
STAGE_COLUMNS += ["reused", "failed"]
FAILED_COLUMNS = ["benchmark", "user", "persona", "stage", "reason"]


def generation_tables(report: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """``stages``: per-stage totals in chain order; ``failed``: one row per failed user."""
    if report is None or report.empty:
        return {
            "stages": pd.DataFrame(columns=STAGE_COLUMNS),
            "failed": pd.DataFrame(columns=FAILED_COLUMNS),
        }
    frame = report[GENERATION_REPORT.names].copy()
    frame["order"] = frame.groupby(["benchmark", "user"]).cumcount()  # the chain's order
    stages = (
        frame.groupby(["benchmark", "stage"], sort=False)
        .agg(
            order=("order", "min"),
            users=("user", "nunique"),
            calls=("calls", "sum"),
            validation_failures=("validation_failures", "sum"),
            refinements=("refinements", "sum"),
            reused=("reused", "sum"),
            failed=("failed", "sum"),
        )
        .reset_index()
        .sort_values(["benchmark", "order"], kind="stable")
    )
    failed = frame[frame["failed"].astype(bool)].sort_values(["benchmark", "user"])
    return {
        "stages": stages[STAGE_COLUMNS].astype({c: int for c in STAGE_COLUMNS[2:]}),
        "failed": failed[FAILED_COLUMNS].reset_index(drop=True),
    }


def _markdown(frame: pd.DataFrame) -> list[str]:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.values.tolist()]
    return lines


def generation_markdown(report: pd.DataFrame | None) -> list[str]:
    """summary.md's generation section (no lines when nothing was generated with a model)."""
    tables = generation_tables(report)
    if tables["stages"].empty:
        return []
    parts: list[str] = []
    for benchmark, stages in tables["stages"].groupby("benchmark", sort=True):
        failed = tables["failed"][tables["failed"]["benchmark"] == benchmark]
        users = int(stages["users"].max())
        parts += [
            f"## {benchmark}: environment generation ({users} users, {len(failed)} failed)",
            "",
            *_markdown(stages.drop(columns="benchmark")),
            "",
            "reused: users whose stage output came from its checkpoint (no model call).",
            "",
        ]
        if not failed.empty:
            parts += ["Failed users (not in data.json):", ""]
            parts += _markdown(failed.drop(columns="benchmark")) + [""]
    return parts
