"""LimitGen-Syn's error types: an item's ``info.category`` -> (aspect, ground-truth subtype).

A fact of the dataset, read by two layers: the metric (``eval/memorybench/limitgen.py``) asks the
judge about the aspect and the subtype, and the simulated user (``simulators/feedback.py``) names
the aspect in its evaluation context ("Target aspect: ..."), as the reference derives it from the
category.
"""

from __future__ import annotations

#: The item's ``info.category`` (error type) -> (aspect, ground-truth subtype).
ERROR_TYPES: dict[str, tuple[str, str]] = {
    "data": ("methodology", "low data quality"),
    "inappropriate": ("methodology", "inappropriate method"),
    "baseline": ("experimental design", "insufficient baseline"),
    "dataset": ("experimental design", "limited datasets"),
    "replace": ("experimental design", "inappropriate datasets"),
    "ablation": ("experimental design", "ablation study"),
    "metric": ("result analysis", "insufficient metric"),
    "analysis": ("result analysis", "limited analysis"),
    "review": ("literature review", "limited scope"),
    "citation": ("literature review", "irrelevant citations"),
    "description": ("literature review", "inaccurate description"),
}


def aspect_of(category: str) -> str:
    """The aspect of an error type ("" for a category the taxonomy does not know)."""
    return ERROR_TYPES.get(category, ("", ""))[0]
