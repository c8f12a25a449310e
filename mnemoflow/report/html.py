"""Build ``results/report.html``: one self-contained page with the tables, figures and provenance.

The page embeds its figures (SVG, base64) and styles, so it can be mailed or attached to a paper's
supplement as one file. The derived tables (TSV) and figures (SVG) are also written to a folder
next to it (``report.html`` -> ``report/``) for people who want to re-plot; Parquet stays in the
results tree, where it is the source of truth. Everything is written to temporary names first
and renamed at the end, so a failed build never leaves a report that looks finished.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mnemoflow.data.tables import read_table, write_atomic_text
from mnemoflow.report import interactive as interactive_report
from mnemoflow.report import plots
from mnemoflow.report import unpublished as unpublished_report
from mnemoflow.report.compare import unpaired_rows
from mnemoflow.report.dossier import NAME as DOSSIER
from mnemoflow.report.drilldown import DrillFrames, drilldown, write_drilldown
from mnemoflow.report.evolution import evolution_table
from mnemoflow.report.feedback import feedback_tables
from mnemoflow.report.generation import generation_tables
from mnemoflow.report.headline import diagnostics_tables, headline_tables, is_headline
from mnemoflow.report.panel import FLAG_RATE, flagged_judges
from mnemoflow.report.provenance import redact, versions
from mnemoflow.report.seeds import seed_text
from mnemoflow.report.stats import BOOTSTRAP_RESAMPLES
from mnemoflow.report.summaries import (
    FAILED_ITEMS_NOTE,
    LEDGER_INCIDENTS,
    OUTCOMES,
    LedgerFile,
    ReportError,
    add_labels,
    check_diagnosis,
    diagnosis_overall,
    failed_items_table,
    ledger_labels,
    ledger_tables,
    load_ledger,
    lower_is_better,
    provider_cache,
    run_costs,
    score_table,
    step_table,
    type_table,
    with_intervals,
    writer_rates,
)
from mnemoflow.report.summary import versions_table

_CI_NAMES = {
    "wilson": "Wilson score interval",
    "bootstrap": f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples",
    "wilson-n": "Wilson score interval of the score out of its n, conservative for graded values",
}


@dataclass
class ReportFigure:
    name: str  # file stem of the derived SVG
    section: str
    caption: str
    svg: str

    def __post_init__(self) -> None:
        # Metric and benchmark names become file names and HTML ids: keep them to safe characters.
        self.name = re.sub(r"[^A-Za-z0-9._@-]+", "_", self.name)


@dataclass
class ReportData:
    """Everything the page shows, computed from the inputs (see :func:`collect`)."""

    scored: pd.DataFrame  # the summary with labels and CI columns
    scores: pd.DataFrame  # last step per run and metric
    types: pd.DataFrame
    steps: pd.DataFrame
    diagnosis: pd.DataFrame | None  # overall rates per benchmark/system (last step)
    ledger_files: pd.DataFrame
    ledger_tasks: pd.DataFrame
    config: dict[str, Any]
    #: Per run: dollars, correct answers and dollars per correct answer (summaries.run_costs).
    costs: pd.DataFrame
    versions: dict[str, str]
    figures: list[ReportFigure]
    sources: dict[str, list[str]]
    #: Interactive (AMemGym) tables: name -> frame (empty when no interactive run).
    interactive: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Learning-from-feedback (MemoryBench protocols) tables, see report/feedback.py.
    feedback: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Environment generation (report/generation.py): per-stage totals and failed users.
    generation: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Published numbers against the run (report/compare.py): cells, taus, ranks; empty when
    #: the report was built without ``--published`` / ``--preset``.
    published: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Why there is no comparison although the run's config asks for one (a paper preset whose
    #: numbers are not shipped: its ``compare.missing``); "" otherwise.
    published_missing: str = ""
    #: A paper that published no numbers for the run's experiment: the preset's ``compare:``
    #: (report/unpublished.py); ``published`` then holds our ``cells`` and the ``plotted`` rows.
    unpublished: dict[str, Any] | None = None
    #: Per run: the memory writer's calls, parse failures and dropped events (writer_rates).
    writers: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per run and role: prompt tokens served from the provider's prefix cache (provider_cache).
    provider_cache: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per benchmark: systems as rows, headline metrics with intervals (report/headline.py).
    headline: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Per benchmark: the counters (parse failures, denominators, ...) of each run.
    diagnostics: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: The judge panel's tables (report/panel.py ``panel_tables``); empty: no ``judge.panel``.
    panel: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: The drill-down's runs (report/drilldown.py ``Drilldown.runs``); empty: not built.
    drill_runs: list[dict[str, Any]] = field(default_factory=list)
    #: The drill-down page's address relative to the report (in the derived folder).
    drill_page: str = "report/questions.html"
    #: Per benchmark its data version and questions asked / dropped, and its loader's rules with
    #: their counts (prepared/data_version.json, report.summary.versions_table).
    data_versions: pd.DataFrame = field(default_factory=pd.DataFrame)
    data_rules: list[str] = field(default_factory=list)
    #: The dossier's address relative to the report (report/dossier.py); "": none written.
    dossier_page: str = ""
    #: The items whose prompt did not fit and was not sent (ledger, item, reason).
    failed_items: pd.DataFrame = field(default_factory=pd.DataFrame)


# --- computing -------------------------------------------------------------------------------


def _read_all(paths: Iterable[str | os.PathLike], schema: str) -> pd.DataFrame:
    frames = [read_table(path, schema) for path in paths]
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        from mnemoflow.data.tables import empty

        return empty(schema)
    return pd.concat(frames, ignore_index=True)


def _ci_note(methods: Iterable[str]) -> str:
    used = sorted({m for m in methods if m in _CI_NAMES})
    missing = sorted({m for m in methods if m not in _CI_NAMES and m})
    parts = []
    if used:
        parts.append(
            "Whiskers: 95 % confidence interval over the questions ("
            + "; ".join(_CI_NAMES[m] for m in used)
            + ")."
        )
    if missing:
        parts.append(
            "Runs without whiskers: "
            + ", ".join(missing)
            + " (see the CI column of the summary table)."
        )
    return " ".join(parts)


def _ordering(metric: str) -> str:
    if lower_is_better(metric):
        return (
            "a share of the wrongly answered questions (n = wrong answers), so lower is better: "
            "best (lowest) run on top. "
        )
    return "best run on top. "


def collect(
    summary: pd.DataFrame,
    judgements: pd.DataFrame,
    ledgers: Sequence[LedgerFile],
    config: dict[str, Any],
    diagnosis: pd.DataFrame | None = None,
    sources: dict[str, list[str]] | None = None,
    generation: pd.DataFrame | None = None,
) -> ReportData:
    """Compute tables and figures from in-memory inputs (no file is read or written)."""
    if summary.empty:
        raise ReportError("summary: no scores to report (the summary table has no rows)")
    scored = add_labels(with_intervals(summary, judgements))
    scores = score_table(scored)
    types = type_table(scored)
    steps = step_table(scored)
    colours = plots.palette(scored["system"])
    figures: list[ReportFigure] = []

    # Figures for the headline metrics only: the counters are numbers to check, not to compare.
    for metric in sorted(m for m in scores["metric"].unique() if is_headline(m)):
        rows = scores[scores["metric"] == metric]
        caption = (
            f"{metric} (micro average over questions) of each run at its last step, one panel "
            "per benchmark; " + _ordering(metric) + _ci_note(rows["ci_method"])
        )
        figure = plots.score_bars(scores, metric, colours)
        figures.append(ReportFigure(f"bars-{metric}", "scores", caption, plots.to_svg(figure)))

    if not types.empty:
        counts = scored[scored["aggregate"].str.startswith("type:")].copy()
        counts["question_type"] = counts["aggregate"].str.removeprefix("type:")
        for benchmark, metric in types.index.droplevel(2).unique():
            if len(types.loc[(benchmark, metric)]) < 2 or not is_headline(metric):
                continue  # one question type: the grid would repeat the bar chart
            n = counts[(counts["benchmark"] == benchmark) & (counts["metric"] == metric)]
            n = n.groupby("question_type")["n"].max()
            figure = plots.type_heatmap(types, benchmark, metric, n)
            caption = (
                f"{benchmark}: {metric} per question type (rows, with the number of questions) "
                "for each run (columns) at its last step."
            )
            figures.append(
                ReportFigure(f"types-{benchmark}-{metric}", "types", caption, plots.to_svg(figure))
            )

    step_metrics = [] if steps.empty else sorted(steps["metric"].unique())
    for metric in [m for m in step_metrics if is_headline(m)]:
        rows = steps[steps["metric"] == metric]
        methods = set(rows["ci_method"])
        band = (
            _ci_note(methods)
            .replace("Whiskers", "Bands")
            .replace("without whiskers", "without bands")
        )
        caption = f"{metric} (micro) after each step, for runs scored at several steps. "
        if lower_is_better(metric):
            caption += "A share of the wrongly answered questions; lower is better. "
        caption += band
        figure = plots.step_curves(steps, metric, colours)
        figures.append(ReportFigure(f"steps-{metric}", "steps", caption, plots.to_svg(figure)))

    overall = None
    if diagnosis is not None and not diagnosis.empty:
        overall = diagnosis_overall(diagnosis)
        caption = (
            "Where memory failed: every question of each system at its last step, by outcome: "
            "answered correctly; or answered wrongly because the fact was never written to "
            "memory (write), written but not retrieved (read), or retrieved but not used in the "
            "answer (utilization); or answered wrongly with no evidence ids to diagnose "
            "(undiagnosable, e.g. abstention questions)"
            + (
                "; or without a verdict (the judge's reply did not parse)"
                if (overall["failure"].eq("unjudged") & overall["rate"].gt(0)).any()
                else ""
            )
            + ". The segments of each bar add up to 100 % of the run's questions. (The "
            "<cause>_rate scores elsewhere in this report are shares of the wrong answers only.)"
        )
        figure = plots.diagnosis_bars(overall)
        figures.append(ReportFigure("diagnosis", "diagnosis", caption, plots.to_svg(figure)))

    tables = interactive_tables(summary)
    if not tables["failures"].empty:
        caption = (
            "Interactive runs: per period, the wrongly answered questions by where memory failed "
            "(AMemGym's recall probes), as shares of all the period's questions; the bars add up "
            "to 1 - accuracy."
        )
        figure = interactive_report.failure_bars_per_period(tables["failures"])
        figures.append(
            ReportFigure("interactive-failures", "interactive", caption, plots.to_svg(figure))
        )

    config_prices = config.get("prices") if isinstance(config, dict) else None
    ledger_files, ledger_tasks = ledger_tables(list(ledgers), config_prices)
    costs = run_costs(list(ledgers), summary, config_prices)
    cached = provider_cache(list(ledgers))
    return ReportData(
        provider_cache=cached,
        scored=scored,
        scores=scores,
        types=types,
        steps=steps,
        diagnosis=overall,
        ledger_files=ledger_files,
        ledger_tasks=ledger_tasks,
        config=redact(config),
        costs=costs,
        versions=versions(),
        figures=figures,
        sources=sources or {},
        interactive=tables,
        feedback=feedback_tables(summary),
        generation=generation_tables(generation),
        writers=writer_rates(list(ledgers)),
        headline=headline_tables(scored),
        diagnostics=diagnostics_tables(scored),
        failed_items=failed_items_table(ledgers),
    )


def interactive_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {
        "accuracy": interactive_report.period_table(summary, "accuracy"),
        "baselines": interactive_report.baseline_table(summary),
        "memory_score": interactive_report.memory_score_table(summary),
        "failures": interactive_report.failure_table(summary),
        "ranks": interactive_report.rank_table(summary),
        "evolution": evolution_table(summary),
    }


# --- rendering -------------------------------------------------------------------------------

_CSS = """
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: #1a1a1a; margin: 0 auto; max-width: 1100px; padding: 1.5rem 2rem 4rem; }
h1 { font-size: 1.9rem; margin-bottom: .2rem; }
h2 { font-size: 1.45rem; margin-top: 2.5rem; border-bottom: 2px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.15rem; margin-top: 1.6rem; }
p.meta { color: #555; margin-top: 0; }
nav ol { columns: 2; }
table { border-collapse: collapse; margin: .8rem 0 1.2rem; font-size: .95rem; }
th, td { padding: .3rem .7rem; border-bottom: 1px solid #e3e3e3; text-align: left; }
th { background: #f3f5f7; position: sticky; top: 0; }
th, td { overflow-wrap: break-word; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.wide { font-size: .8rem; } table.wide th, table.wide td { padding: .25rem .4rem; }
td small { color: #555; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
figure { margin: 1.2rem 0 2rem; }
figure img { width: 100%; max-width: 1000px; height: auto; display: block; }
figcaption { color: #333; font-size: .95rem; max-width: 1000px; margin-top: .4rem; }
pre { background: #f6f8fa; padding: 1rem; overflow-x: auto; font-size: .9rem; }
details { margin: .6rem 0; } summary { cursor: pointer; font-weight: 600; }
.note { color: #555; font-style: italic; }
.scroll { overflow-x: auto; }
ul.files { columns: 3; font-size: .95rem; }
"""

#: Outcomes of the diagnosis that are memory stages (their table columns say "failure").
FAILURE_STAGES = ("write", "read", "utilization")

_FORMATS = {
    "micro": "{:.3f}",
    "macro": "{:.3f}",
    "value": "{:.3f}",
    "hit_rate": "{:.1%}",
    "latency_s": "{:.1f}",
    "cost_usd": "{:.4f}",
    "usd": "{:.4f}",
    "usd_per_correct": "{:.5f}",
    "accuracy": "{:.3f}",
    "write": "{:.1%}",
    "read": "{:.1%}",
    "utilization": "{:.1%}",
    "correct": "{:.1%}",
    "undiagnosable": "{:.1%}",
    "unjudged": "{:.1%}",
}

_LEDGER_HEADERS = {
    "ledger": "ledger",
    "role": "role",
    "task": "task",
    "model": "model",
    "calls": "calls",
    "cache_hits": "cache hits",
    "hit_rate": "hit rate",
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "latency_s": "latency sum (s)",
    "retries": "retries",
    "errors": "errors",
    "parse_failures": "parse failures",
    "dropped_events": "dropped events",
    "writer_calls": "writer calls",
    "parse_failure_rate": "parse failure rate",
    "dropped_per_call": "dropped events per call",
    "cached_in": "provider-cached in",
    "truncated_calls": "truncated prompts",
    "truncated_messages": "messages dropped",
    "cost_usd": "cost (USD)",
}


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return '<td class="num">–</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if column in _FORMATS:
            text = _FORMATS[column].format(value)
        elif float(value).is_integer():
            text = f"{int(value):,}"
        else:
            text = f"{value:.3f}"
        return f'<td class="num">{text}</td>'
    return f"<td>{_breakable(value)}</td>"


#: Tables with more columns are set smaller so that they keep to the page width.
WIDE_COLUMNS = 10
_BREAK_AFTER = re.compile(r"([_:/@])(?=\w)")


def _breakable(value: Any) -> str:
    """Escaped text that may wrap after ``_ : / @`` (<wbr>), so identifiers such as
    ``memory_score_undefined`` or a ledger's path break there, not mid-word, when a table needs
    the room."""
    return _BREAK_AFTER.sub(r"\1<wbr>", html.escape(str(value)))


def table_html(frame: pd.DataFrame, columns: dict[str, str] | None = None) -> str:
    """An HTML table of ``frame``; ``columns`` maps column names to headers (and selects them)."""
    if columns is None:
        columns = {name: name for name in frame.columns}
    head = "".join(f"<th>{_breakable(header)}</th>" for header in columns.values())
    body = []
    for row in frame.to_dict("records"):
        body.append("<tr>" + "".join(_cell(name, row.get(name)) for name in columns) + "</tr>")
    wide = ' class="wide"' if len(columns) > WIDE_COLUMNS else ""
    table = f"<table{wide}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _score_rows(scores: pd.DataFrame) -> pd.DataFrame:
    shown = scores.copy()
    shown["ci"] = [
        f"[{low:.3f}, {high:.3f}]" if pd.notna(low) else (method or "–")
        for low, high, method in zip(
            shown["ci_low"], shown["ci_high"], shown["ci_method"], strict=True
        )
    ]
    return shown


def _number(value: float, signed: bool = False) -> str:
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return text.replace("-0.000", "0.000").replace("+-0.000", "0.000")


def _rank_text(value: float) -> str:
    """A rank change as the AMemGym paper prints it (▲k, ▼k, —)."""
    k = int(round(value))
    return f"▲{k}" if k > 0 else f"▼{-k}" if k < 0 else "—"


def _published_html(published: dict[str, pd.DataFrame]) -> str:
    """The published cells the run has a value for (one table per published table), the rank
    agreement and the rank changes."""
    cells = published["cells"]
    paired = cells[cells["ours"].notna()].copy()
    with_ci = paired[paired["outside"] != ""]
    outside = int((with_ci["outside"] == "yes").sum())
    tables = html.escape(", ".join(sorted(set(cells["paper"] + "/" + cells["table"]))))
    text = (
        f"<p>{len(cells)} published cells ({tables}); "
        f"{len(paired)} paired with a run of these results; the published value lies "
        f"<b>outside our 95 % interval</b> in {outside} of the {len(with_ci)} with an interval. "
        "Period <i>mean</i> is the run's mean over its periods at its last step (the paper's over "
        "its own periods: the note says when they differ). Rank changes are marked as the AMemGym "
        "paper marks them: ▲k, we rank the row k places higher than the paper; ▼k lower; a "
        "printed on- vs off-policy ∆Rank (▲k: k places higher off-policy) is set beside our own "
        "among the rows paired.</p>"
    )
    unpaired = unpaired_rows(cells)
    if len(unpaired):
        text += "<h3>Published rows without a counterpart in the run</h3>" + table_html(unpaired)
    if paired.empty:
        return text + _note("No published cell is paired with a run: name the systems with --map.")
    rank = paired["metric"] == "rank_change"
    paired["ours_ci"] = [
        f"[{_number(low)}, {_number(high)}]" if pd.notna(low) else (method or "–")
        for low, high, method in zip(
            paired["ci_low"], paired["ci_high"], paired["ci_method"], strict=True
        )
    ]
    for name in ("published", "ours", "diff"):
        paired[name] = [
            (f"{int(round(v)):+d}" if name == "diff" else _rank_text(v))
            if is_rank
            else _number(v, signed=name == "diff")
            for v, is_rank in zip(paired[name], rank, strict=True)
        ]
    columns = {
        "row": "row",
        "system": "ours",
        "protocol": "protocol",
        "period": "period",
        "aggregate": "aggregate",
        "metric": "metric",
        "published": "published",
        "ours": "our value",
        "ours_ci": "95 % CI",
        "diff": "diff",
        "outside": "outside CI",
        "note": "note",
    }
    if "seeds_mean" in paired.columns:  # repeats: N (docs/reproduce.md "Seeds")
        paired["seeds_text"] = [
            seed_text(mean, sd, n) if n else "–"
            for mean, sd, n in zip(
                paired["seeds_mean"], paired["seeds_sd"], paired["seeds"], strict=True
            )
        ]
        at = list(columns).index("ours_ci") + 1
        items = list(columns.items())
        columns = dict([*items[:at], ("seeds_text", "mean ± sd (seeds)"), *items[at:]])
    for (paper, table), part in paired.groupby(["paper", "table"], sort=True):
        text += f"<h3>{html.escape(paper)}/{html.escape(table)}</h3>" + table_html(part, columns)
    if not published["taus"].empty:
        taus = published["taus"].assign(tau=[_number(t) for t in published["taus"]["tau"]])
        text += "<h3>Rank agreement (Kendall τ-b)</h3>" + table_html(taus)
        text += "<h3>Rank changes</h3>" + table_html(published["ranks"])
    return text


def _unpublished_html(section: dict[str, pd.DataFrame], compare: dict[str, Any]) -> str:
    """Ours where the paper published no numbers (report/unpublished.py): the reason, our values
    with their intervals and each row's reason, then the plotted rows no system of ours runs."""
    cells = section["cells"]
    text = f"<p>{html.escape(unpublished_report.lead(compare, cells))}</p>"
    if cells.empty:
        text += _note(unpublished_report.nothing_to_show(compare))
    else:
        shown = _score_rows(cells)
        shown["ours"] = [_number(v) for v in shown["ours"]]
        columns = {
            "row": "row",
            "system": "ours",
            "benchmark": "benchmark",
            "protocol": "protocol",
            "period": "period",
            "aggregate": "aggregate",
            "metric": "metric",
            "ours": "our value",
            "ci": "95 % CI",
            "n": "n",
            "note": "why no published value",
        }
        text += table_html(shown, columns)
    plotted = section.get("plotted")
    if plotted is not None and len(plotted):
        text += f"<h3>{html.escape(unpublished_report.PLOTTED_HEADING)}</h3>" + table_html(plotted)
    return text


def _headline_html(
    tables: dict[str, pd.DataFrame], links: dict[tuple[str, str, str], str] | None = None
) -> str:
    """One table per benchmark: a run per row, a headline metric per column, each value with its
    interval below it in the same cell (so the table keeps to the page width). ``links``:
    (benchmark, system, protocol) -> the run's questions on the drill-down page."""
    links = links or {}
    parts = []
    for benchmark, table in tables.items():
        metrics = [c for c in table.columns if f"{c} 95 % CI" in table.columns]
        rest = [c for c in table.columns if c not in ("run", "system", "protocol", "step", "n")]
        rest = [c for c in rest if c not in metrics and not c.endswith(" 95 % CI")]
        head = ["run", "n"] + [m for m in table.columns if m in metrics or m in rest]
        cells = []
        for row in table.to_dict("records"):
            href = links.get((benchmark, row["system"], row["protocol"]))
            run = html.escape(str(row["run"]))
            if href:
                run = f'<a href="{html.escape(href)}" title="its questions">{run}</a>'
            out = [f"<td>{run}</td>", _cell("n", row["n"])]
            for name in head[2:]:
                if name in metrics:
                    value = row[name]
                    text = "–" if pd.isna(value) else _number(value)
                    ci = html.escape(str(row[f"{name} 95 % CI"] or ""))
                    out.append(f'<td class="num">{text}<br><small>{ci}</small></td>')
                elif isinstance(row[name], float) and pd.notna(row[name]):
                    out.append(f'<td class="num">{_number(row[name])}</td>')
                else:
                    out.append(_cell(name, row[name]))
            cells.append("<tr>" + "".join(out) + "</tr>")
        steps = sorted(set(table["step"]))
        step = f"step {steps[0]}" if len(steps) == 1 else "last step of each run"
        parts.append(
            f"<h3>{html.escape(benchmark)} <small>({step})</small></h3>"
            '<div class="scroll"><table class="headline"><thead><tr>'
            + "".join(f"<th>{html.escape(h)}</th>" for h in head)
            + f"</tr></thead><tbody>{''.join(cells)}</tbody></table></div>"
        )
    return "".join(parts)


def _drill_links(data: ReportData) -> dict[tuple[str, str, str], str]:
    """(benchmark, system, protocol) -> the address of the run's questions at its last step."""
    return {
        (r["benchmark"], r["system"], r["protocol"]): (
            f"{data.drill_page}#run={r['key']}&step={max(r['steps'], key=int)}"
        )
        for r in data.drill_runs
    }


def _drill_html(runs: list[dict[str, Any]], page: str) -> str:
    """The runs of the drill-down page, each with its outcomes at the last step and a link."""
    protocols: dict[str, set[str]] = {}
    for run in runs:
        protocols.setdefault(run["benchmark"], set()).add(run["protocol"])
    rows = []
    for run in runs:
        last = max(run["steps"], key=int)
        info = run["steps"][last]
        name = run["system"]
        if len(protocols[run["benchmark"]]) > 1:
            name += " · " + run["protocol"]
        href = html.escape(f"{page}#run={run['key']}&step={last}")
        outcomes = ", ".join(f"{o} {n}" for o, n in info["outcomes"].items() if n)
        rows.append(
            f"<tr><td>{html.escape(run['benchmark'])}</td>"
            f'<td><a href="{href}">{html.escape(name)}</a></td>'
            f'<td class="num">{html.escape(", ".join(sorted(run["steps"], key=int)))}</td>'
            f'<td class="num">{info["n"]:,}</td><td>{html.escape(outcomes)}</td></tr>'
        )
    return (
        f'<p>Every question of every run can be read on <a href="{html.escape(page)}">the '
        "questions page</a>: the question, the gold answer, the answer, the memory items "
        "the reader was shown, the judge's raw replies, the outcome (with the write / read / "
        "utilization diagnosis where there is one) and the answer call's tokens and cost; "
        "filterable by benchmark, run, step, question type and outcome, with a second run "
        "beside it for the same question. It loads each run's questions when they are chosen "
        "(no server needed: "
        "keep <code>report/</code> beside this page).</p>"
        '<div class="scroll"><table><thead><tr><th>benchmark</th><th>run</th><th>steps</th>'
        "<th>questions (last step)</th><th>outcomes (last step)</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _figure_html(figure: ReportFigure, number: int) -> str:
    data = base64.b64encode(figure.svg.encode("utf-8")).decode("ascii")
    caption = html.escape(figure.caption)
    return (
        f'<figure id="fig-{html.escape(figure.name)}">'
        f'<img src="data:image/svg+xml;base64,{data}" alt="Figure {number}: {caption}">'
        f"<figcaption><b>Figure {number}.</b> {caption}</figcaption></figure>"
    )


def _counted(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """A ledger table without the counters that are zero in every row (retries, errors, ... of
    a clean run), so the table keeps to the page width; the TSV keeps every column."""
    zero = [
        name
        for name in LEDGER_INCIDENTS
        if name in frame.columns
        and pd.to_numeric(frame[name], errors="coerce").fillna(0).eq(0).all()
    ]
    kept = frame.drop(columns=zero)
    return kept, _headers(kept)


def _headers(frame: pd.DataFrame) -> dict[str, str]:
    return {name: _LEDGER_HEADERS.get(name, name) for name in frame.columns}


def _costs_html(costs: pd.DataFrame) -> str:
    """Dollars per run beside its accuracy, and per correct answer (nothing without ledgers)."""
    if costs.empty:
        return ""
    columns = {
        "benchmark": "benchmark",
        "system": "system",
        "protocol": "protocol",
        "metric": "metric",
        "accuracy": "last step",
        "usd": "cost (USD)",
        "usd_per_correct": "USD per correct answer",
        "calls": "calls",
        "tokens_in": "tokens in",
        "tokens_out": "tokens out",
        "truncated_calls": "truncated prompts",
    }
    return (
        "<h3>Cost per run</h3><p>Dollars of the tokens the endpoints processed for each run (all "
        "its steps and shards: memory writing, answering, judging), at the prices of "
        "<code>prices:</code> over the shipped table (<code>data/model_prices.yaml</code>); "
        "local backends cost nothing, a response-cache hit nothing, and a model without a price "
        "makes the run's cost unknown (–). Per correct answer: over the answers judged correct "
        "at all of the run's steps. <i>(shared)</i>: a benchmark's upper bound and environment "
        "generation.</p>" + table_html(costs, columns)
    )


def _provider_cache_html(table: pd.DataFrame) -> str:
    """Per run and role, the prompt tokens the endpoint served from its own prefix cache
    (nothing when no endpoint reported any)."""
    if table.empty:
        return ""
    columns = {
        "benchmark": "benchmark",
        "system": "system",
        "protocol": "protocol",
        "role": "role",
        "tokens_in": "tokens in",
        "cached_in": "provider-cached in",
        "cached_share": "cached share",
    }
    return (
        "<h3>Provider prompt cache</h3><p>Of the prompt tokens each run's endpoints processed, "
        "those the endpoint served from its own prefix cache "
        "(<code>usage.prompt_tokens_details.cached_tokens</code>, priced at "
        "<code>cached_input</code>); <code>models.&lt;role&gt;.prefix_dispatch</code> sends "
        "requests sharing a prompt prefix one after another so a server's cache serves more of "
        "them.</p>" + table_html(table, columns)
    )


def _dossier_note(page: str) -> str:
    """The link to what produced each number (report/dossier.py), where it was written."""
    if not page:
        return ""
    link = f'<a href="{html.escape(page)}">{html.escape(page)}</a>'
    return (
        f"<p>What produced each of our numbers, run by run: {link} (commit, data version and "
        "hash, models and judge with prompt version, sampling settings, cost, per-question files "
        "with their sha256; beside each published cell, the paper's model and settings as its "
        "table states them).</p>"
    )


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _panel_html(panel: dict[str, pd.DataFrame]) -> str:
    """The judge panel: per-judge accuracy beside its false-positive rate, the headline's
    spread across the panel, agreement per pair, the probe and the answers judges disagree on."""
    text = (
        "<p>The same answers judged by every judge of <code>judge.panel</code> and by the "
        "configured judge (<i>configured</i>, the headline's), at each run's last step. The "
        "false-positive rate is the share of the probe's wrong answers (a swapped key fact, a "
        "vague answer, a wrong abstention) a judge accepts, with its 95 % interval; a judge "
        f"over {FLAG_RATE:.0%} is flagged. Agreement (Cohen's kappa) and disagreements cover "
        "every step.</p>"
    )
    for line in flagged_judges(panel):
        text += f'<p class="note"><b>Lenient judge</b>: {html.escape(line)}.</p>'
    parts = [
        ("accuracy", "Accuracy per judge"),
        ("spread", "Headline and its spread across the panel"),
        ("kappa", "Agreement per pair of judges"),
        ("probe", "False-positive probe"),
        ("cost", "Calls per judge (the panel's and the probe's jobs)"),
    ]
    for name, heading in parts:
        if not panel.get(name, pd.DataFrame()).empty:
            text += f"<h3>{heading}</h3>" + table_html(panel[name])
    split = panel.get("disagreements", pd.DataFrame())
    if split.empty:
        text += _note("The judges agree on every answer.")
    else:
        text += (
            f"<details><summary>Answers the judges disagree on: {len(split)} (1 correct, "
            f"0 wrong; panel_disagreements.tsv)</summary>{table_html(split)}</details>"
        )
    return text


def render_html(
    data: ReportData, title: str = "mnemoflow report", files: Sequence[str] = ()
) -> str:
    """The report page as one string (figures embedded)."""
    number = 0
    sections: list[tuple[str, str, str]] = []  # (anchor, heading, body)

    def figures(section: str) -> str:
        nonlocal number
        parts = []
        for figure in data.figures:
            if figure.section == section:
                number += 1
                parts.append(_figure_html(figure, number))
        return "".join(parts)

    body = (
        "<p>Each benchmark's headline scores, one row per run at its last step: the mean over "
        "questions with its <b>95 % confidence interval</b> below it (from the per-question "
        "judgements, or for a proportion without them, such as recall, from the score and its "
        "<i>n</i>; where neither applies, or the judgements do not reproduce the score, the cell "
        "says so), <i>n</i> the questions. AMemGym's own figure, the mean over periods, has a "
        "column of its own; <i>(all items)</i> counts unscored items wrong; <i>(published)</i> is "
        "a paper's value for the paired run. Counters (parse failures, denominators, baselines) "
        'are under <a href="#diagnostics">Diagnostics</a>; every score of every run, with '
        "macro averages, is in <code>scores.tsv</code>.</p>"
        + _dossier_note(data.dossier_page)
        + _headline_html(data.headline, _drill_links(data))
        + figures("scores")
    )
    sections.append(("summary", "Headline scores", body))

    if data.published and data.unpublished:
        body = _unpublished_html(data.published, data.unpublished)
        sections.append(("published", "Published vs ours", body + _dossier_note(data.dossier_page)))
    elif data.published:
        body = _published_html(data.published) + _dossier_note(data.dossier_page)
        sections.append(("published", "Published vs ours", body))
    elif data.published_missing:
        text = f"The paper's numbers for this run are not shipped: {data.published_missing}."
        sections.append(("published", "Published vs ours", _note(text)))

    if data.panel:
        sections.append(("panel", "Judge panel", _panel_html(data.panel)))

    if data.drill_runs:
        sections.append(
            ("questions", "Questions (drill-down)", _drill_html(data.drill_runs, data.drill_page))
        )

    if not data.types.empty:
        body = figures("types")
        for (benchmark, metric), grid in data.types.groupby(level=[0, 1]):
            grid = grid.droplevel([0, 1]).dropna(axis=1, how="all").reset_index()
            body += (
                f"<details><summary>{html.escape(benchmark)}: {html.escape(metric)} by question "
                f"type (table)</summary>{table_html(grid)}</details>"
            )
        sections.append(("types", "By question type", body))

    if data.steps.empty:
        body = _note(
            "Every run was scored at a single step; score-vs-step curves appear when a protocol "
            "scores several steps (periods)."
        )
    else:
        body = figures("steps")
    sections.append(("steps", "Score against step", body))

    if any(not frame.empty for frame in data.interactive.values()):
        body = ""
        for name, heading in (
            ("accuracy", "Overall accuracy"),
            ("baselines", "Random and upper bound"),
            ("memory_score", "Memory score"),
        ):
            if not data.interactive.get(name, pd.DataFrame()).empty:
                body += f"<h3>{heading} per period</h3>" + table_html(data.interactive[name])
        if interactive_report.NOT_MEANINGFUL in data.interactive["memory_score"].columns:
            body += (
                f"<p>Memory score = (accuracy - random) / (upper bound - random) per (user, "
                f"period). <b>{interactive_report.NOT_MEANINGFUL}</b> names the periods where "
                f"upper bound - random &lt; {interactive_report.MIN_GAP} or some (user, period) "
                "has an upper bound below random: there the ratio magnifies a few questions or "
                "reverses its sign; compare accuracy with random and with the <code>none</code> "
                "system instead.</p>"
            )
        body += figures("interactive")
        if not data.interactive["ranks"].empty:
            body += (
                "<h3>On- vs off-policy ranking</h3><p>Memory score (mean over periods) when each "
                "system conversed itself (on-policy) and when it memorized another system's "
                "transcripts (off-policy replay); rank 1 is best. A rank change means reusing "
                "transcripts would have ranked the systems differently.</p>"
                + table_html(data.interactive["ranks"])
            )
        if not data.interactive.get("evolution", pd.DataFrame()).empty:
            body += (
                "<h3>Self-evolution (AMemGym Table 3)</h3><p>AWI whose memory-update instructions "
                "(the types of information to remember) are rewritten after each checkpoint from "
                "question-only or complete feedback, against no evolution: on-policy accuracy and "
                "memory score (mean over periods), the periods in which the section changed for "
                "at least one user, the share of (user, period) rewrites that changed it, and "
                "rewrites whose reply never parsed (section kept).</p>"
                + table_html(data.interactive["evolution"])
            )
        sections.append(("interactive", "Interactive memory (per period)", body))

    if not data.generation.get("stages", pd.DataFrame()).empty:
        body = (
            "<p>Environments generated with a model: per stage, the users that ran it, model "
            "calls, validation failures, refinements, and users whose stage output came from "
            "its checkpoint (reused: no model call).</p>" + table_html(data.generation["stages"])
        )
        failed = data.generation["failed"]
        body += (
            "<h3>Failed users (not in data.json)</h3>" + table_html(failed)
            if not failed.empty
            else "<p>No user failed.</p>"
        )
        sections.append(("generation", "Environment generation", body))

    if any(not frame.empty for frame in data.feedback.values()):
        body = ""
        for name, heading, text in (
            (
                "curves",
                "Score per step",
                "The mean per-item score (MemoryBench's summary value) "
                "of the test split at every step; step 0 of stepwise and on-policy runs is before "
                "any feedback, so a curve that rises is memory of feedback at work.",
            ),
            (
                "rates",
                "Feedback per on-policy step",
                "Shares of the step's live dialogues in "
                "which the simulated user liked, disliked or ended the conversation.",
            ),
            (
                "normalized",
                "Normalized scores",
                "Min-max and z scores with the official statistics of the set's domain or task.",
            ),
            ("protocols", "On-policy vs off-policy", "Each system's last-step score per protocol."),
        ):
            if not data.feedback[name].empty:
                body += f"<h3>{heading}</h3><p>{text}</p>" + table_html(data.feedback[name])
        sections.append(("feedback", "Learning from feedback (per step)", body))

    if data.diagnosis is None:
        body = _note("No diagnosis table was given (write / read / utilization failures).")
    else:
        wide = data.diagnosis.pivot_table(
            index=["benchmark", "system", "step", "n"], columns="failure", values="rate"
        ).reset_index()
        headers = {"benchmark": "benchmark", "system": "system", "step": "step", "n": "questions"}
        headers |= {o: f"{o} failure" if o in FAILURE_STAGES else o for o in OUTCOMES}
        if "unjudged" in wide.columns and not wide["unjudged"].gt(0).any():
            wide = wide.drop(columns="unjudged")
        headers = {name: header for name, header in headers.items() if name in wide.columns}
        body = (
            figures("diagnosis")
            + "<p>Shares of all questions (each row adds up to 100 %).</p>"
            + table_html(wide, headers)
        )
    if not data.writers.empty:
        body += (
            "<h3>Memory writers</h3><p>Per run, the <code>memory_writer</code> calls, the "
            "replies that never parsed after the gateway's re-asks (the update is skipped: "
            "memory stays stale) and the events of parsed replies that could not be applied "
            "(an AWE event with an unknown id), also as shares of the calls.</p>"
            + table_html(data.writers, _headers(data.writers))
        )
    sections.append(("diagnosis", "Failure diagnosis", body))

    if data.ledger_files.empty:
        body = _costs_html(data.costs) + _note("No ledgers were given.")
    else:
        totals = data.ledger_tasks.drop(columns=["role", "task", "model", "hit_rate"]).sum(
            numeric_only=True, min_count=1
        )
        if data.ledger_tasks["cost_usd"].isna().any():
            totals["cost_usd"] = float("nan")
        hits = int(totals["cache_hits"])
        calls = int(totals["calls"])
        cost = totals["cost_usd"]
        cost_text = f"{cost:.4f} USD" if pd.notna(cost) else "unknown (no price for some models)"
        body = (
            f"<p>{calls:,} model calls ({hits:,} answered from the cache), "
            f"{int(totals['tokens_in']):,} tokens in and {int(totals['tokens_out']):,} out; "
            f"cost: {html.escape(cost_text)}. Tokens are what the endpoints processed (a "
            "response-cache hit has none, so a rerun from the cache costs nothing); the cost "
            "prices them with <code>prices:</code> in the config over the shipped table "
            "(USD per million tokens; provider-cached prompt tokens at <code>cached_input</code>; "
            "local backends free).</p>"
            + _costs_html(data.costs)
            + _provider_cache_html(data.provider_cache)
            + "<h3>By role and task</h3><p>Retries, errors, parse failures, dropped events, "
            "provider-cached tokens and truncated prompts are shown where any is not zero (the "
            "TSV files have every column).</p>"
            + table_html(*_counted(data.ledger_tasks))
            + f"<details><summary>By ledger file ({len(data.ledger_files):,} files: one per "
            "job)</summary>" + table_html(*_counted(data.ledger_files)) + "</details>"
        )
    sections.append(("cost", "Cost and tokens", body))

    if data.diagnostics:
        body = (
            "<p>The counters each run wrote, at its last step: judge and reply parse failures, "
            "the two denominators of an accuracy (<i>:scored</i> over the scored items, "
            "<i>:all</i> over all, <i>:unscored</i> how many), AMemGym's baselines and undefined "
            "memory scores, self-evolution rewrites. They say whether the headline numbers can be "
            "trusted; a non-zero parse-failure count is worth a look in the drill-down.</p>"
        )
        for benchmark, table in data.diagnostics.items():
            body += f"<h3>{html.escape(benchmark)}</h3>" + table_html(table)
        sections.append(("diagnostics", "Diagnostics", body))

    if len(data.failed_items):
        note = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(FAILED_ITEMS_NOTE))
        body = f"<p>{len(data.failed_items):,} {note}</p>" + table_html(data.failed_items)
        sections.append(("failed-items", "Failed items", body))

    if not data.data_versions.empty:
        rules = "".join(f"<li>{html.escape(rule)}</li>" for rule in data.data_rules)
        body = table_html(data.data_versions) + (
            _note("What each loader's rules dropped or kept (prepared/notes.txt):")
            + f"<ul>{rules}</ul>"
            if rules
            else ""
        )
        sections.append(("data", "Data", body))

    config_text = yaml.safe_dump(data.config, sort_keys=False, allow_unicode=True)
    sections.append(("config", "Config", f"<pre>{html.escape(config_text)}</pre>"))
    rows = pd.DataFrame({"software": list(data.versions), "version": list(data.versions.values())})
    sections.append(("versions", "Software", table_html(rows)))

    inputs = "".join(
        f"<details><summary>{html.escape(kind)} ({len(paths)})</summary><ul>"
        + "".join(f"<li><code>{html.escape(p)}</code></li>" for p in paths)
        + "</ul></details>"
        for kind, paths in data.sources.items()
        if paths
    )
    derived = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in files)
    body = (f"<p>Inputs (paths relative to this page):</p>{inputs}" if inputs else "") + (
        f'<p>Derived tables (TSV) and figures (SVG):</p><ul class="files">{derived}</ul>'
        if derived
        else ""
    )
    if body:
        sections.append(("files", "Files", body))

    nav = "".join(
        f'<li><a href="#{anchor}">{html.escape(heading)}</a></li>'
        for anchor, heading, _ in sections
    )
    content = "".join(
        f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>{body}</section>'
        for anchor, heading, body in sections
    )
    benchmarks = ", ".join(sorted(data.scored["benchmark"].unique()))
    runs = data.scored["label"].nunique()
    commit = data.versions.get("git commit", "")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="meta">{html.escape(benchmarks)} · {runs} runs · mnemoflow '
        f"{html.escape(data.versions.get('mnemoflow', ''))} · commit "
        f"<code>{html.escape(commit)}</code></p>"
        f"<nav><ol>{nav}</ol></nav>{content}</body></html>\n"
    )


# --- files -----------------------------------------------------------------------------------


def _write_derived(data: ReportData, folder: Path) -> list[str]:
    """TSV tables and SVG figures into ``folder``; returns their names."""
    folder.mkdir(parents=True, exist_ok=True)
    tables = {
        "summary.tsv": data.scored.drop(columns=["label"]),
        "scores.tsv": data.scores,
        "steps.tsv": data.steps,
        "ledger_files.tsv": data.ledger_files,
        "ledger_tasks.tsv": data.ledger_tasks,
        "costs.tsv": data.costs,
    }
    if not data.writers.empty:
        tables["writers.tsv"] = data.writers
    if not data.types.empty:
        tables["types.tsv"] = data.types.reset_index()
    if data.diagnosis is not None:
        tables["diagnosis.tsv"] = data.diagnosis
    for name, frame in data.interactive.items():
        if not frame.empty:
            tables[f"interactive_{name}.tsv"] = frame
    for name, frame in data.feedback.items():
        if not frame.empty:
            tables[f"feedback_{name}.tsv"] = frame
    for name, frame in data.generation.items():
        if not frame.empty:
            tables[f"generation_{name}.tsv"] = frame
    for name, frame in data.published.items():
        tables[f"published_{name}.tsv"] = frame
    for name, frame in data.panel.items():
        tables[f"panel_{name}.tsv"] = frame
    names = []
    for name, frame in tables.items():
        frame.to_csv(folder / name, sep="\t", index=False, float_format="%.6g")
        names.append(name)
    for figure in data.figures:
        name = f"{figure.name}.svg"
        (folder / name).write_text(figure.svg, encoding="utf-8")
        names.append(name)
    (folder / "config.yaml").write_text(
        yaml.safe_dump(data.config, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    (folder / "versions.json").write_text(
        json.dumps(data.versions, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return [*names, "config.yaml", "versions.json"]


def build_report(
    summary_path: str | os.PathLike,
    judgements_paths: Iterable[str | os.PathLike],
    ledger_paths: Iterable[str | os.PathLike],
    config: dict[str, Any],
    out_html: str | os.PathLike,
    *,
    diagnosis_path: str | os.PathLike | None = None,
    generation_paths: Iterable[str | os.PathLike] = (),
    title: str = "mnemoflow report",
    published: dict[str, pd.DataFrame] | None = None,
    published_missing: str = "",
    unpublished: dict[str, Any] | None = None,
    drill: DrillFrames | None = None,
    data_versions: dict[str, dict[str, Any]] | None = None,
    panel: dict[str, pd.DataFrame] | None = None,
    dossier: dict[str, Any] | None = None,
) -> Path:
    """Read the result tables and ledgers, write ``out_html`` and its derived-files folder.

    The folder is ``out_html`` without its suffix (``results/report.html`` ->
    ``results/report/``); it is replaced as a whole, after everything in it was written.
    ``published`` (cells, taus, ranks of :func:`mnemoflow.report.compare.compare_published`)
    adds the "Published vs ours" section (``published_missing``: that section says why there is
    no comparison; ``unpublished``: the preset's ``compare:`` of a paper that published no numbers,
    ``published`` then holding our ``cells`` and the ``plotted`` rows of
    :func:`mnemoflow.report.unpublished.unpublished_section`). ``drill``
    (:func:`mnemoflow.report.drilldown.read_frames`) adds the per-question drill-down,
    ``report/questions.html``. ``data_versions`` (benchmark -> its prepared/data_version.json)
    adds the "Data" section: versions, questions, loader rules;
    ``panel`` (:func:`mnemoflow.report.panel.read_panel`) the "Judge panel" section;
    ``dossier`` (:func:`mnemoflow.report.dossier.build_dossier`) is written as
    ``report/dossier.json``, which the headline and published sections link.
    """
    out_html = Path(out_html)
    judgements_paths = [Path(p) for p in judgements_paths]
    ledger_paths = [Path(p) for p in ledger_paths]
    generation_paths = [Path(p) for p in generation_paths]
    summary = read_table(summary_path, "summary")
    judgements = _read_all(judgements_paths, "judgements")
    diagnosis = None
    if diagnosis_path is not None:
        diagnosis = read_table(diagnosis_path, "diagnosis")
        check_diagnosis(diagnosis, str(diagnosis_path))
    labels = ledger_labels(ledger_paths)
    ledgers = [load_ledger(p, label) for p, label in zip(ledger_paths, labels, strict=True)]

    def shown(path: str | os.PathLike) -> str:
        return os.path.relpath(Path(path).resolve(), out_html.parent.resolve())

    sources = {
        "summary": [shown(summary_path)],
        "judgements": [shown(p) for p in judgements_paths],
        "diagnosis": [shown(diagnosis_path)] if diagnosis_path is not None else [],
        "ledgers": [shown(p) for p in ledger_paths],
        "generation reports": [shown(p) for p in generation_paths],
    }
    generation = _read_all(generation_paths, "generation_report") if generation_paths else None
    data = collect(summary, judgements, ledgers, config, diagnosis, sources, generation)
    data.published = dict(published or {})
    data.published_missing = published_missing
    data.unpublished = dict(unpublished) if unpublished and data.published else None
    data.panel = dict(panel or {})
    if data.published:
        data.headline = headline_tables(data.scored, data.published.get("cells"))
    if data_versions:
        data.data_versions, data.data_rules = versions_table(data_versions)
    drill_data = None
    if drill is not None:
        if drill.judgements.empty:
            drill.judgements = judgements
        drill_data = drilldown(drill, config.get("prices") if isinstance(config, dict) else None)
        data.drill_runs = drill_data.runs

    folder = out_html.with_suffix("")
    data.drill_page = f"{folder.name}/questions.html"
    if dossier is not None:
        data.dossier_page = f"{folder.name}/{DOSSIER}"
    out_html.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=out_html.parent))
    try:
        _readable(staging, directory=True)
        names = _write_derived(data, staging)
        if dossier is not None:
            text = json.dumps(dossier, indent=2, sort_keys=True, allow_nan=False) + "\n"
            (staging / DOSSIER).write_text(text, encoding="utf-8")
            names.append(DOSSIER)
        if drill_data is not None and drill_data.runs:
            names += write_drilldown(drill_data, staging, title, out_html.name)[:1]
        page = render_html(data, title, [f"{folder.name}/{name}" for name in names])
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    write_atomic_text(out_html, page)
    _readable(out_html)
    return out_html


def _readable(path: Path, directory: bool = False) -> None:
    """Give a page the usual permissions (temporary files are created owner-only)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if directory else 0o666) & ~umask)
