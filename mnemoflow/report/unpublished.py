"""Ours beside a paper that published no numbers for the experiment a preset runs.

Some papers only plot an experiment (MemoryBench's on-policy and stepwise curves), or print a
table no readable source holds (AMemGym's self-evolution table). Such a preset's ``compare:``
says so with ``published: null`` and names what it would be compared with, so that
``mnemoflow compare --preset`` and summary.md still set out our numbers, each with the reason it
has no published value beside it:

    compare:
      published: null
      paper: memorybench                    # the paper's id, as in data/published
      table: stepwise_off_policy.qwen3-8b   # what the paper shows, named like a table id
      missing: ...                          # why no number is shipped (the default reason)
      metrics: [weighted_average, z_score]  # our summary metrics that stand for it
      protocols: [stepwise_off_policy]      # optional: our protocols that do (default: every one)
      benchmark: amemgym_v1                 # optional: our benchmark (default: every one)
      plotted:                              # optional, per our benchmark: the figure and the
        mb_legal: {figure: Figure 10, rows: {BM25-S: (a), Embed-S: (b)}}   # rows it plots
      not_plotted: ...                      # why a benchmark without a figure has none
      unpaired: {A-Mem: ...}                # why no system of ours is that plotted row

Our value of each (benchmark, system, protocol, metric) is the one a published ``mean`` cell
would be paired with (:data:`~mnemoflow.report.compare.MEAN_AGGREGATES`: AMemGym's mean over
periods, a MemoryBench set's normalized score), at the last step, or at every step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from mnemoflow.errors import ConfigError
from mnemoflow.report.compare import (
    CELL_COLUMNS,
    MEAN_AGGREGATES,
    MEAN_OVER_PERIODS,
    Run,
    interval,
    markdown_table,
)

UNPAIRED_COLUMNS = ["paper", "table", "row", "cells", "reason"]


def check_spec(compare: Mapping[str, Any], where: str) -> None:
    """One-line error naming ``where`` (the preset file) and the field that is wrong."""
    for key in ("paper", "table", "missing"):
        if not isinstance(compare.get(key), str) or not compare[key].strip():
            raise ConfigError(f"{where}: compare.{key}: a text is needed (compare.published null)")
    metrics = compare.get("metrics")
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise ConfigError(f"{where}: compare.metrics: a list of summary metric names is needed")
    protocols = compare.get("protocols")
    if protocols is not None and (
        not isinstance(protocols, list) or not all(isinstance(p, str) for p in protocols)
    ):
        raise ConfigError(f"{where}: compare.protocols: a list of protocol names is needed")
    plotted = compare.get("plotted") or {}
    if not isinstance(plotted, Mapping):
        raise ConfigError(f"{where}: compare.plotted: expected {{BENCHMARK: {{figure, rows}}}}")
    for bench, figure in plotted.items():
        rows = figure.get("rows") if isinstance(figure, Mapping) else None
        if rows is None or not figure.get("figure") or not rows or not isinstance(rows, Mapping):
            raise ConfigError(
                f"{where}: compare.plotted.{bench}: expected {{figure: NAME, rows: {{ROW: PANEL}}}}"
            )


def _text(value: Any) -> str:
    return " ".join(str(value or "").split())


def reason(compare: Mapping[str, Any], benchmark: str, label: str) -> str:
    """Why our cell of ``benchmark`` whose system the paper names ``label`` has no published
    value beside it."""
    if not label:
        return "not a paper row (the system has no published_as)"
    plotted = compare.get("plotted") or {}
    if not plotted:
        return _text(compare["missing"])
    figure = plotted.get(benchmark)
    if figure is None:
        return _text(compare.get("not_plotted") or compare["missing"])
    panel = figure["rows"].get(label)
    if panel is None:
        shown = ", ".join(figure["rows"])
        return f"not in the paper: its {figure['figure']} plots {shown} only"
    return f"the paper plots this experiment only ({figure['figure']}{panel}); no numbers published"


def _ours(summary: pd.DataFrame, compare: Mapping[str, Any], every_step: bool) -> pd.DataFrame:
    """Our summary rows that stand for the paper's: the metrics (and protocols) named, the first
    of MEAN_AGGREGATES each (benchmark, system, protocol, metric) has, its last step or every
    step."""
    rows = summary[
        summary["metric"].isin(compare["metrics"]) & summary["aggregate"].isin(MEAN_AGGREGATES)
    ]
    if compare.get("benchmark"):
        rows = rows[rows["benchmark"] == compare["benchmark"]]
    if compare.get("protocols"):
        rows = rows[rows["protocol"].isin(compare["protocols"])]
    keys = ["benchmark", "system", "protocol", "metric"]
    rank = rows["aggregate"].map({a: i for i, a in enumerate(MEAN_AGGREGATES)})
    first = rank.groupby([rows[k] for k in keys]).transform("min")
    rows = rows[rank == first]
    if not every_step:
        rows = rows[rows["step"] == rows.groupby(keys)["step"].transform("max")]
    return rows.sort_values([*keys, "step"], kind="stable")


def unpublished_cells(
    run: Run,
    compare: Mapping[str, Any],
    pairs: list[tuple[str, str]],
    every_step: bool = False,
) -> pd.DataFrame:
    """Our cells in the columns of a published comparison (``published`` empty), each with the
    reason it has no published value in ``note``; ``pairs`` (our system, the paper's row)."""
    labels = dict(pairs)
    cells = []
    ours = _ours(run.summary, compare, every_step)
    keys = ["benchmark", "system", "protocol", "metric"]
    last = ours.groupby(keys)["step"].transform("max") if len(ours) else ours["step"]
    for row, final in zip(ours.itertuples(index=False), last, strict=True):
        label = labels.get(row.system, "")
        # the experiment's mean is the last step's; an earlier step's (--all) names its periods
        mean = "mean" if row.step == final else f"mean 0-{row.step}"
        low, high, method = interval(run, row)
        cells.append(
            {
                "paper": compare["paper"],
                "table": compare["table"],
                "row": label,
                "system": row.system,
                "protocol": row.protocol,
                "period": mean if row.aggregate == MEAN_OVER_PERIODS else str(row.step),
                "aggregate": row.aggregate,
                "metric": row.metric,
                "published": math.nan,
                "ours": row.value,
                "ci_low": low,
                "ci_high": high,
                "ci_method": method,
                "n": int(row.n),
                "diff": math.nan,
                "outside": "",
                "note": reason(compare, row.benchmark, label),
                "benchmark": row.benchmark,
            }
        )
    return pd.DataFrame(cells, columns=CELL_COLUMNS)


def plotted_rows(
    summary: pd.DataFrame, compare: Mapping[str, Any], shown: set[tuple[str, str]], reasons: dict
) -> pd.DataFrame:
    """The rows the paper plots that no system of the run (``summary``: its table) stands for
    on that benchmark (``shown``: its (benchmark, paper row) pairs), with the reason
    (``reasons``: the preset's ``compare.unpaired`` and its systems left out of the run) and the
    figure; ``cells`` is 0: a plotted curve has no published number."""
    out = []
    for bench, figure in (compare.get("plotted") or {}).items():
        ran = set(summary.loc[summary["benchmark"] == bench, "system"])
        for label, panel in figure["rows"].items():
            if (bench, label) in shown:
                continue
            why = reasons.get(label) or (
                f"the run has no benchmark {bench!r}" if not ran else "no system of the run"
            )
            out.append(
                {
                    "paper": compare["paper"],
                    "table": compare["table"],
                    "row": label,
                    "cells": 0,
                    "reason": f"{_text(why)} ({figure['figure']}{panel}, {bench})",
                }
            )
    return pd.DataFrame(out, columns=UNPAIRED_COLUMNS)


def unpublished_section(
    run: Run,
    compare: Mapping[str, Any],
    pairs: list[tuple[str, str]],
    reasons: Mapping[str, str],
    every_step: bool = False,
) -> dict[str, pd.DataFrame]:
    """The section's tables, as compare, summary.md and report.html show them: ``cells`` (ours,
    :func:`unpublished_cells`) and ``plotted`` (the paper's rows alone, :func:`plotted_rows`)."""
    return {
        "cells": unpublished_cells(run, compare, pairs, every_step),
        "plotted": plotted_rows(run.summary, compare, _shown(run.summary, pairs), reasons),
    }


def lead(compare: Mapping[str, Any], cells: pd.DataFrame) -> str:
    """The section's first sentence: what has no published numbers, and why."""
    what = f"{compare['paper']}/{compare['table']}"
    return (
        f"No published numbers for {what}: {_text(compare['missing'])}. Our {len(cells)} cells, "
        "each with the reason it has no published value beside it (note)."
    )


def nothing_to_show(compare: Mapping[str, Any]) -> str:
    """What the section says in place of our cells when the run has none."""
    return f"The run has no value of {', '.join(compare['metrics'])} to show."


#: The heading of the table of plotted rows without a counterpart.
PLOTTED_HEADING = "Plotted rows without a counterpart in the run"


def section_lines(
    cells: pd.DataFrame, unpaired: pd.DataFrame, compare: Mapping[str, Any], head: str
) -> list[str]:
    """The Markdown of the section: ``head``, the reason, our cells, the plotted rows alone."""
    lines = [
        head,
        "",
        lead(compare, cells),
        "",
        markdown_table(cells) if len(cells) else nothing_to_show(compare),
        "",
    ]
    if len(unpaired):
        lines += [
            f"{PLOTTED_HEADING}:",
            "",
            markdown_table(unpaired),
            "",
        ]
    return lines


def _shown(summary: pd.DataFrame, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """(benchmark, paper row) of every pair whose system of ours ran on that benchmark."""
    ran = set(zip(summary["benchmark"], summary["system"], strict=True))
    return {(bench, theirs) for bench, ours in ran for each, theirs in pairs if each == ours}
