"""The HTML report: summary tables, figures with confidence intervals, costs and provenance.

``build_report`` is imported lazily so that ``mnemoflow.report.stats`` and friends load without
matplotlib.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_report"]


def __getattr__(name: str) -> Any:
    if name == "build_report":
        from mnemoflow.report.html import build_report

        return build_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
