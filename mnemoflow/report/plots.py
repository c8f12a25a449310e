"""The report's figures, drawn with matplotlib's object API (no pyplot, no global backend).

Figures are built on :class:`matplotlib.figure.Figure` directly, so they render with the Agg/SVG
canvases whatever backend a user configured, and two reports built in one process share no state.
Sizes are chosen for a page about 1000 px wide: a 10-inch figure at 100 px per inch is shown at its
natural size, so 12-point text reads as about 16 px. Each run keeps one colour in every figure.
SVG output is made byte-stable (fixed hash salt, no date) so the same results give the same files.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from mnemoflow.report.summaries import OUTCOMES, lower_is_better

WIDTH_IN = 10.0
STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.titleweight": "bold",
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "mnemoflow-report",
    "svg.fonttype": "path",  # glyphs as paths: the page needs no fonts to look the same
}

#: Okabe–Ito colours (distinguishable with the common colour-vision deficiencies), then tab20.
_OKABE_ITO = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
]
#: The stages are ordered (write, then read, then use), so a sequential palette, distinct from the
#: systems' colours so that no stage looks like a system; correct answers green, the rest grey.
FAILURE_COLOURS = {
    "correct": "#74C476",
    "write": "#3F007D",
    "read": "#6A51A3",
    "utilization": "#A8A4CF",
    "undiagnosable": "#969696",
    "unjudged": "#E0E0E0",
}
FAILURE_NAMES = {
    "correct": "answered correctly",
    "write": "write (never stored)",
    "read": "read (stored, not retrieved)",
    "utilization": "utilization (retrieved, not used)",
    "undiagnosable": "wrong, no evidence ids",
    "unjudged": "no verdict (judge reply unparsed)",
}


_LINESTYLES = ["-", "--", ":", "-."]


def palette(systems: Iterable[str]) -> dict[str, str]:
    """A fixed colour per memory system, in sorted order, shared by every figure of a report.

    Colour follows the system, not the run: the same system under two protocols keeps its colour
    (curves tell protocols apart by line style), which keeps the number of colours small.
    """
    from matplotlib import colormaps

    extra = [colormaps["tab20"](i) for i in range(20)]
    colours: list = _OKABE_ITO + extra
    return {name: colours[i % len(colours)] for i, name in enumerate(sorted(set(systems)))}


def _legend_columns(labels: Iterable[str]) -> int:
    """As many legend columns as fit in the figure's width at the legend's font size."""
    labels = list(labels)
    longest = max((len(label) for label in labels), default=1)
    per_entry_px = 7 * longest + 50  # ~7 px per character at 11 pt, plus the line sample
    return max(1, min(len(labels), 4, int(WIDTH_IN * 100 * 0.95) // per_entry_px))


def _new_figure(height: float) -> Figure:
    from matplotlib import rc_context

    with rc_context(STYLE):
        return Figure(figsize=(WIDTH_IN, height), layout="constrained")


def _panels(figure: Figure, count: int, columns: int):
    rows = math.ceil(count / columns)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return axes[:count]


def _unit_range(values: pd.Series) -> bool:
    finite = values.dropna()
    return finite.empty or (finite.min() >= 0 and finite.max() <= 1)


def _ink(colour) -> str:
    """Black or white, whichever reads better on ``colour`` (by perceived luminance)."""
    r, g, b = to_rgb(colour)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def to_svg(figure: Figure) -> str:
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context(STYLE):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def to_png(figure: Figure, dpi: int = 100) -> bytes:
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with rc_context(STYLE):
        figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def score_bars(table: pd.DataFrame, metric: str, colours: dict[str, str]) -> Figure:
    """Horizontal bars of one metric per run, one panel per benchmark, 95 % CI whiskers.

    ``table`` is :func:`mnemoflow.report.summaries.score_table`'s output. Bars are horizontal so
    long system names stay readable; the best run is at the top of each panel (the lowest, for a
    failure rate).
    """
    from matplotlib import rc_context

    rows = table[table["metric"] == metric]
    benchmarks = sorted(rows["benchmark"].unique())
    longest = max((len(label) for label in rows["label"]), default=0)
    columns = 2 if len(benchmarks) > 1 and longest <= 16 else 1
    per_panel = rows.groupby("benchmark").size().max()
    panel_height = 0.9 + 0.42 * per_panel
    height = panel_height * math.ceil(len(benchmarks) / columns) + 0.3
    unit = _unit_range(rows["micro"])
    with rc_context(STYLE):
        figure = _new_figure(height)
        for ax, benchmark in zip(
            _panels(figure, len(benchmarks), columns), benchmarks, strict=True
        ):
            part = rows[rows["benchmark"] == benchmark].sort_values(
                "micro", ascending=not lower_is_better(metric), kind="stable"
            )
            y = np.arange(len(part))
            values = part["micro"].to_numpy(dtype=float)
            low = part["ci_low"].to_numpy(dtype=float)
            high = part["ci_high"].to_numpy(dtype=float)
            ax.barh(y, values, color=[colours[system] for system in part["system"]], height=0.7)
            has_ci = ~np.isnan(low)
            if has_ci.any():
                ax.errorbar(
                    values[has_ci],
                    y[has_ci],
                    xerr=[values[has_ci] - low[has_ci], high[has_ci] - values[has_ci]],
                    fmt="none",
                    ecolor="#333333",
                    elinewidth=1.3,
                    capsize=4,
                )
            right = np.where(has_ci, high, values)
            for yi, value, end in zip(y, values, right, strict=True):
                ax.text(end, yi, f"  {value:.3f}", va="center", ha="left", fontsize=11)
            ax.set_yticks(y, part["label"])
            ax.set_title(benchmark)
            ax.set_xlabel(f"{metric} (micro)")
            ax.grid(axis="y", visible=False)
            if unit:
                ax.set_xlim(0, 1.12)
            else:
                ax.set_xlim(0, max(1e-9, float(np.nanmax(right))) * 1.15)
    return figure


def type_heatmap(
    table: pd.DataFrame, benchmark: str, metric: str, counts: pd.Series | None = None
) -> Figure:
    """Per-question-type scores of every run as an annotated grid (types down, runs across).

    A grid stays legible where grouped bars (runs x types) would not: LongMemEval alone has six
    question types. ``counts`` (questions per type) is appended to the row names when given.
    """
    from matplotlib import rc_context

    grid = table.loc[(benchmark, metric)].dropna(axis=1, how="all")
    types = list(grid.index)
    runs = list(grid.columns)
    values = grid.to_numpy(dtype=float)
    height = 1.6 + 0.48 * len(types)
    with rc_context(STYLE):
        figure = _new_figure(height)
        ax = figure.subplots()
        unit = _unit_range(pd.Series(values.ravel()))
        image = ax.imshow(
            values,
            cmap="viridis",
            aspect="auto",
            vmin=0 if unit else None,
            vmax=1 if unit else None,
        )
        for i in range(len(types)):
            for j in range(len(runs)):
                value = values[i, j]
                if np.isnan(value):
                    continue
                ink = _ink(image.cmap(image.norm(value)))
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", color=ink, fontsize=11)
        names = types
        if counts is not None:
            names = [f"{t} (n={int(counts.get(t, 0))})" for t in types]
        ax.set_yticks(range(len(types)), names)
        ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right")
        ax.grid(False)
        ax.set_title(f"{benchmark}: {metric} by question type")
        figure.colorbar(image, ax=ax, label=metric, shrink=0.9)
    return figure


def step_curves(steps: pd.DataFrame, metric: str, colours: dict[str, str]) -> Figure:
    """Micro score against step, one line per run, one panel per benchmark, 95 % CI bands."""
    from matplotlib import rc_context

    rows = steps[steps["metric"] == metric]
    benchmarks = sorted(rows["benchmark"].unique())
    columns = 2 if len(benchmarks) > 1 else 1
    labels = sorted(rows["label"].unique())
    legend_rows = math.ceil(len(labels) / _legend_columns(labels))
    height = 3.6 * math.ceil(len(benchmarks) / columns) + 0.6 + 0.28 * legend_rows
    unit = _unit_range(rows["value"])
    with rc_context(STYLE):
        figure = _new_figure(height)
        handles = {}
        styles = {p: _LINESTYLES[i % 4] for i, p in enumerate(sorted(rows["protocol"].unique()))}
        for ax, benchmark in zip(
            _panels(figure, len(benchmarks), columns), benchmarks, strict=True
        ):
            part = rows[rows["benchmark"] == benchmark]
            for label, run in part.groupby("label", sort=True):
                run = run.sort_values("step")
                system, protocol = run["system"].iloc[0], run["protocol"].iloc[0]
                (line,) = ax.plot(
                    run["step"],
                    run["value"],
                    marker="o",
                    linewidth=2,
                    color=colours[system],
                    linestyle=styles[protocol],
                )
                handles[label] = line
                low = run["ci_low"].to_numpy(dtype=float)
                if not np.isnan(low).all():
                    ax.fill_between(
                        run["step"], low, run["ci_high"], color=colours[system], alpha=0.15
                    )
            ax.set_title(benchmark)
            ax.set_xlabel("step")
            ax.set_ylabel(f"{metric} (micro)")
            ax.xaxis.get_major_locator().set_params(integer=True)
            if unit:
                ax.set_ylim(0, 1.02)
        figure.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=_legend_columns(handles),
            frameon=False,
        )
    return figure


def diagnosis_bars(overall: pd.DataFrame) -> Figure:
    """Stacked shares of all questions per run: correct, or lost at writing, reading or using.

    ``overall`` is :func:`mnemoflow.report.summaries.diagnosis_overall`'s output; its outcomes add
    up to 1 per run, so every bar spans 100 % of the run's questions. Best run (most correct) on
    top; an outcome no run has (usually "unjudged") is left out of the legend.
    """
    from matplotlib import rc_context

    benchmarks = sorted(overall["benchmark"].unique())
    per_panel = overall.groupby("benchmark")["system"].nunique().max()
    height = (1.0 + 0.45 * per_panel) * len(benchmarks) + 1.0
    present = overall.groupby("failure")["rate"].max()
    outcomes = [o for o in OUTCOMES if present.get(o, 0.0) > 0]
    with rc_context(STYLE):
        figure = _new_figure(height)
        for ax, benchmark in zip(_panels(figure, len(benchmarks), 1), benchmarks, strict=True):
            part = overall[overall["benchmark"] == benchmark]
            wide = part.pivot_table(index="system", columns="failure", values="rate", aggfunc="sum")
            wide = wide.reindex(columns=list(OUTCOMES)).fillna(0.0)
            wide = wide.sort_values("correct", kind="stable")
            y = np.arange(len(wide))
            left = np.zeros(len(wide))
            for outcome in outcomes:
                widths = wide[outcome].to_numpy()
                ax.barh(
                    y,
                    widths,
                    left=left,
                    height=0.7,
                    color=FAILURE_COLOURS[outcome],
                    label=FAILURE_NAMES[outcome],
                )
                ink = _ink(FAILURE_COLOURS[outcome])
                for yi, start, width in zip(y, left, widths, strict=True):
                    if width >= 0.06:
                        ax.text(
                            start + width / 2,
                            yi,
                            f"{100 * width:.0f}%",
                            ha="center",
                            va="center",
                            color=ink,
                            fontsize=11,
                            fontweight="bold",
                        )
                left += widths
            ax.set_yticks(y, wide.index)
            ax.set_xlim(0, 1)
            ax.set_xlabel("share of all questions, by outcome")
            step = int(part["step"].max())
            ax.set_title(f"{benchmark} (step {step})")
            ax.grid(axis="y", visible=False)
        handles, names = figure.axes[0].get_legend_handles_labels()
        figure.legend(
            handles, names, loc="outside lower center", ncols=3, frameon=False, fontsize=11
        )
    return figure
