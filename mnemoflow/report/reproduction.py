"""What a run's own config asks to be compared with, and that comparison for summary.md / report.

A paper preset (``configs/paper/``) names its published tables in ``compare: {published,
benchmark, missing}`` and labels each system with the row the paper prints (``published_as``).
The workflow reads both from the run's config, so a preset run's summary.md and report.html carry
the "Published vs ours" section that ``mnemoflow compare RESULTS --preset NAME`` prints, from the
same function (:func:`mnemoflow.report.compare.compare_published`).

- ``compare.published: PAPER[/TABLE][,...]``: those tables; ``compare.benchmark`` our benchmark
  (default: per paired system, the run benchmark that runs it); ``compare.unpaired`` the reason
  each published row without a counterpart among the preset's systems has none, listed with it.
- ``compare.published: null``: the paper published no numbers for the experiment, or they are
  not shipped; the section lists ours, each with the reason (``compare.missing``, the figure that
  plots it: :mod:`mnemoflow.report.unpublished`).
- no ``compare:`` but systems with ``published_as``: the published rows with those labels, compared
  with our benchmark that ``compare.benchmark`` names, else the run's one benchmark whose loader
  is the published benchmark (AMemGym rows: the run's one ``loader: amemgym`` benchmark);
  nothing when that is not one benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.published import PUBLISHED_DIR, load_published, select_published
from mnemoflow.report.compare import compare_published, load_run, markdown_table, unpaired_rows
from mnemoflow.report.unpublished import (
    check_spec,
    section_lines,
    unpublished_section,
)


@dataclass(frozen=True)
class Request:
    """The comparison a config asks for (a plain dict in a rule's params: :meth:`as_params`)."""

    published: str | None  # PAPER[/TABLE][,...]; None: rows chosen by label
    pairs: tuple[tuple[str, str], ...]  # (our system, the paper's row)
    benchmark: str | None  # our benchmark for the published rows
    missing: str = ""  # compare.published null: what is not shipped
    unpaired: tuple[tuple[str, str], ...] = ()  # (the paper's row, why no system pairs with it)
    unpublished: dict | None = None  # compare.published null: the compare key (report/unpublished)

    def as_params(self) -> dict[str, Any]:
        return {
            "published": self.published,
            "pairs": [list(p) for p in self.pairs],
            "benchmark": self.benchmark,
            "missing": self.missing,
            "unpaired": [list(p) for p in self.unpaired],
            "unpublished": self.unpublished,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> Request | None:
        if not params:
            return None
        return cls(
            published=params.get("published"),
            pairs=tuple((str(a), str(b)) for a, b in params.get("pairs") or ()),
            benchmark=params.get("benchmark"),
            missing=str(params.get("missing") or ""),
            unpaired=tuple((str(a), str(b)) for a, b in params.get("unpaired") or ()),
            unpublished=params.get("unpublished"),
        )

    @property
    def shipped(self) -> bool:
        return not self.missing


def published_as(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(system, published name) of every ``systems.<name>.published_as`` of a config."""
    return [
        (system, str(spec["published_as"]))
        for system, spec in (config.get("systems") or {}).items()
        if isinstance(spec, Mapping) and spec.get("published_as")
    ]


def unpaired_reasons(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(published row, reason) of a config's ``compare.unpaired``."""
    reasons = (config.get("compare") or {}).get("unpaired") or {}
    return tuple((str(row), " ".join(str(why).split())) for row, why in reasons.items())


def run_pairs(
    pairs: Sequence[tuple[str, str]], unpaired: Sequence[tuple[str, str]], ran: set[str]
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(the ``published_as`` ``pairs`` of the systems in ``ran``, (paper row, why it has no
    counterpart) of ``unpaired`` (``compare.unpaired``) and of the systems left out of the run):
    a run of part of a preset pairs what it ran and says why the rest is unpaired."""
    reasons = dict(unpaired)
    for ours, theirs in pairs:
        if ours not in ran:
            reasons[theirs] = f"its counterpart {ours} is not in the run"
    return tuple(p for p in pairs if p[0] in ran), tuple(reasons.items())


def request_of(
    config: Mapping[str, Any], benchmarks: Mapping[str, Any] | None = None
) -> Request | None:
    """The comparison ``config`` asks for (module docstring), or None. ``benchmarks``: the
    benchmark specs the jobs see (default the config's); only the run's systems' labels count."""
    benchmarks = benchmarks if benchmarks is not None else config.get("benchmarks") or {}
    compare = config.get("compare") or {}
    ran = set((config.get("run") or {}).get("systems") or ())
    for name in (config.get("run") or {}).get("benchmarks") or ():
        ran |= set((benchmarks.get(name) or {}).get("systems") or ())
    pairs, unpaired = run_pairs(published_as(config), unpaired_reasons(config), ran)
    if "published" in compare and compare["published"] is None:
        missing = " ".join(str(compare.get("missing") or "not shipped").split())
        spec = dict(compare) if compare.get("metrics") else None
        if spec is not None:  # the section reads these: checked at start, as compare --preset
            check_spec(spec, "config")
        return Request(
            None,
            pairs,
            compare.get("benchmark"),
            missing=missing,
            unpaired=unpaired,
            unpublished=spec,
        )
    if compare.get("published"):
        return Request(
            str(compare["published"]),
            pairs,
            compare.get("benchmark"),
            unpaired=unpaired,
        )
    if pairs:
        return Request(None, pairs, compare.get("benchmark"))
    return None


def _by_label(published: pd.DataFrame, request: Request, benchmarks: Mapping[str, Any]):
    """(rows, our benchmark) for a request without tables: the rows of its labels."""
    labels = {theirs for _, theirs in request.pairs}
    rows = published[published["row"].isin(labels)]
    if rows.empty:
        return rows, None
    if request.benchmark:
        return rows, request.benchmark
    names = rows["benchmark"].unique()
    if len(names) != 1:
        return rows.iloc[0:0], None
    ours = [b for b, spec in benchmarks.items() if (spec or {}).get("loader") == names[0]]
    return (rows, ours[0]) if len(ours) == 1 else (rows.iloc[0:0], None)


def published_section(
    summary: str | Path,
    request: Request | None,
    published_paths: Iterable[str | Path] = (),
    benchmarks: Mapping[str, Any] | None = None,
) -> tuple[dict[str, pd.DataFrame] | None, list[str]]:
    """(the tables for report.html, or None; summary.md's lines) of a run whose config made
    ``request``: cells, taus and ranks, or for a paper that published no numbers our cells and
    the plotted rows alone (:func:`mnemoflow.report.unpublished.unpublished_section`);
    ``published_paths`` the CSVs (default: data/published)."""
    if request is None:
        return None, []
    if not request.shipped and request.unpublished:
        spec = request.unpublished
        section = unpublished_section(
            load_run(summary), spec, list(request.pairs), dict(request.unpaired)
        )
        lines = section_lines(section["cells"], section["plotted"], spec, "## Published vs ours")
        return section, lines
    if not request.shipped:
        return None, [
            "## Published vs ours",
            "",
            f"The paper's numbers for this run are not shipped: {request.missing}.",
            "",
        ]
    paths = list(published_paths) or PUBLISHED_DIR
    published = load_published(paths)
    if request.published:
        rows, benchmark = select_published(published, request.published), request.benchmark
    else:
        rows, benchmark = _by_label(published, request, benchmarks or {})
    if rows.empty:
        return None, []
    cells, taus, ranks = compare_published(
        load_run(summary), rows, list(request.pairs), benchmark, dict(request.unpaired)
    )
    paired = cells[cells["ours"].notna()]
    unpaired = unpaired_rows(cells)
    outside = int((paired["outside"] == "yes").sum())
    with_ci = int((paired["outside"] != "").sum())
    tables = request.published or ", ".join(sorted(set(rows["paper"] + "/" + rows["table"])))
    lines = [
        "## Published vs ours",
        "",
        f"Against {tables}: {len(cells)} published cells, {len(paired)} paired with the run; the "
        f"published value lies outside our 95 % interval in {outside} of the {with_ci} with an "
        "interval (diff = ours - published; all cells: `mnemoflow compare results --all`).",
        "",
        markdown_table(paired) if len(paired) else "No published cell is paired with the run.",
        "",
    ]
    if len(unpaired):
        lines += ["Published rows without a counterpart in the run:", ""]
        lines += [markdown_table(unpaired), ""]
    if len(taus):
        lines += ["Rank agreement (Kendall tau):", "", markdown_table(taus), ""]
    return {"cells": cells, "taus": taus, "ranks": ranks}, lines
