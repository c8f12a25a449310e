"""Which metric scores a benchmark: decided here, from its config entry, and nowhere else.

A benchmark is scored by the chain that runs it. The static QA chain judges every answer with a
judge (:data:`JUDGES`, registered by :mod:`mnemoflow.eval.judges`); the feedback protocols score
every item with an item-metric module (:data:`ITEM_METRICS`: ``evaluate_item``, ``item_value``,
``check_supported``). A loader that has a judge or item metric of its own name uses it, any other
the generic judge and MemoryBench's item metrics; ``judge:`` in the entry picks the judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mnemoflow.errors import ConfigError
from mnemoflow.eval import memorybench_metrics, synthetic_feedback
from mnemoflow.registry import Registry

#: Judges of the static QA chain by name (each a :class:`mnemoflow.eval.judges.JudgeKind`).
JUDGES = Registry("judge", builtin_modules=["mnemoflow.eval.judges"])
#: Item metrics of the feedback protocols by name.
ITEM_METRICS = Registry("item metric")
ITEM_METRICS.register("memorybench")(memorybench_metrics)
ITEM_METRICS.register("synthetic_feedback")(synthetic_feedback)


@dataclass(frozen=True)
class BenchmarkMetric:
    """How one benchmark is scored: its judge's name and its item metrics' name."""

    judge: str
    items: str

    def item_metrics(self) -> ModuleType:
        return ITEM_METRICS.get(self.items)


def metric_for(spec: dict[str, Any]) -> BenchmarkMetric:
    """The metric of a benchmark entry (``loader``, optional ``judge``)."""
    loader = spec.get("loader")
    judge = spec.get("judge") or (loader if loader in JUDGES else "generic")
    if judge not in JUDGES:
        raise ConfigError(f"config judge: one of {JUDGES.names()}, got {judge!r}")
    return BenchmarkMetric(judge, loader if loader in ITEM_METRICS else "memorybench")
