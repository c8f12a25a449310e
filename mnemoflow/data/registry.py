"""Benchmark loaders by name: each turns one data format into the unified tables.

A loader is a function ``(spec) -> (sessions, questions)``; ``spec`` is the benchmark's entry in
config.yaml (``loader``, ``source`` and loader-specific options). Adding a benchmark touches one
module: define the loader and decorate it with :func:`register_loader`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pandas as pd

from mnemoflow.llm.types import ConfigError

Loader = Callable[[dict[str, Any]], tuple[pd.DataFrame, pd.DataFrame]]
StepCounter = Callable[[dict[str, Any]], int]
_LOADERS: dict[str, Loader] = {}
_STEPS: dict[str, StepCounter] = {}

#: Modules that register the built-in loaders when imported.
BUILTIN_MODULES = ["mnemoflow.data.synthetic"]


def register_loader(name: str, steps: StepCounter | None = None) -> Callable[[Loader], Loader]:
    """Register a loader; ``steps(spec)`` says how many steps its data has (default 1: static)."""

    def decorator(fn: Loader) -> Loader:
        _LOADERS[name] = fn
        if steps is not None:
            _STEPS[name] = steps
        return fn

    return decorator


def _import_builtins() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def loaders() -> list[str]:
    _import_builtins()
    return sorted(_LOADERS)


def load_benchmark(spec: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the loader the spec names and return its (sessions, questions) frames."""
    _import_builtins()
    name = spec.get("loader")
    if name not in _LOADERS:
        raise ConfigError(f"benchmark loader {name!r} is unknown; available: {loaders()}")
    return _LOADERS[name](spec)


def n_steps(spec: dict[str, Any]) -> int:
    """Number of steps of the step chain for this benchmark (1 for static benchmarks)."""
    _import_builtins()
    counter = _STEPS.get(spec.get("loader", ""))
    return int(counter(spec)) if counter else 1
