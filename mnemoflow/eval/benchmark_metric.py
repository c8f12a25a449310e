"""Which metric scores a benchmark: decided here, from its config entry, and nowhere else.

A benchmark is scored by the chain that runs it. The static QA chain judges every answer with a
judge (:data:`JUDGES`, registered by :mod:`mnemoflow.eval.static_qa.judges`); the feedback protocols
score every item with an item-metric module (:data:`ITEM_METRICS`: ``evaluate_item``,
``item_value``, ``check_supported``). A loader that has a judge or item metric of its own name uses
it, any other the generic judge and MemoryBench's item metrics; ``judge:`` in the entry picks the
judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench import (
    memorybench_judge_protocol,
    memorybench_metrics,
    synthetic_feedback,
)
from mnemoflow.registry import Registry

#: Judges of the static QA chain by name (each a
#: :class:`mnemoflow.eval.static_qa.judges.JudgeKind`).
JUDGES = Registry("judge", builtin_modules=["mnemoflow.eval.static_qa.judges"])
#: Item metrics of the feedback protocols by name.
ITEM_METRICS = Registry("item metric")
ITEM_METRICS.register("memorybench")(memorybench_metrics)
ITEM_METRICS.register("synthetic_feedback")(synthetic_feedback)
#: MemoryBench's current upstream protocol (``scoring: judge``; the paper's is ``memorybench``).
ITEM_METRICS.register("memorybench_judge")(memorybench_judge_protocol)
#: A MemoryBench benchmark's ``scoring:`` -> its item metrics (``paper`` is the default).
SCORINGS = {"paper": "memorybench", "judge": "memorybench_judge"}


@dataclass(frozen=True)
class BenchmarkMetric:
    """How one benchmark is scored: its judge's name and its item metrics' name."""

    judge: str
    items: str

    def item_metrics(self) -> ModuleType:
        return ITEM_METRICS.get(self.items)


def scoring_of(spec: dict[str, Any]) -> str:
    """A benchmark's ``scoring:`` (``paper`` unless set); a one-line ConfigError for an unknown
    value or for ``scoring`` on a benchmark that is not MemoryBench's."""
    scoring = spec.get("scoring", "paper")
    if scoring not in SCORINGS:
        raise ConfigError(
            f"config benchmarks.<name>.scoring: one of {sorted(SCORINGS)}, got {scoring!r}"
        )
    if scoring != "paper" and spec.get("loader") != "memorybench":
        raise ConfigError(
            f"config benchmarks.<name>.scoring: {scoring!r} is MemoryBench's (loader "
            f"memorybench), not loader {spec.get('loader')!r}'s"
        )
    return scoring


def metric_for(spec: dict[str, Any]) -> BenchmarkMetric:
    """The metric of a benchmark entry (``loader``, optional ``judge`` and ``scoring``)."""
    loader = spec.get("loader")
    judge = spec.get("judge") or (loader if loader in JUDGES else "generic")
    if judge not in JUDGES:
        raise ConfigError(f"config judge: one of {JUDGES.names()}, got {judge!r}")
    if scoring_of(spec) != "paper":
        return BenchmarkMetric(judge, SCORINGS[spec["scoring"]])
    return BenchmarkMetric(judge, loader if loader in ITEM_METRICS else "memorybench")
