"""Protocols by name: which step chain a benchmark runs, and how many steps it has.

A benchmark's spec names its protocols (``protocols: [on_policy, off_policy]``; default the
static ``qa`` chain). Each protocol writes, for every (benchmark, system, step), the run's
``scores.parquet`` and ``diagnosis.parquet`` under ``results/{benchmark}/{system}/{protocol}/
step{k}/``, which ``summarize`` collects. Adding a protocol touches one module: register it here
with its step counter and add the module to :data:`BUILTIN_MODULES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from mnemoflow.data.registry import n_steps
from mnemoflow.errors import ConfigError

StepCounter = Callable[[dict[str, Any]], int]
_STEPS: dict[str, StepCounter] = {"qa": n_steps}

#: Modules that register the built-in protocols when imported.
BUILTIN_MODULES: list[str] = ["mnemoflow.protocols.feedback", "mnemoflow.protocols.interactive"]


def register_protocol(name: str, steps: StepCounter) -> None:
    """Register a protocol; ``steps(spec)`` is its number of steps for a benchmark spec."""
    _STEPS[name] = steps


def _import_builtins() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def protocol_names() -> list[str]:
    _import_builtins()
    return sorted(_STEPS)


def protocols_of(name: str, spec: dict[str, Any]) -> list[str]:
    """The protocols benchmark ``name`` runs, checked against the registered ones."""
    chosen = spec.get("protocols", ["qa"])
    if isinstance(chosen, str) or not isinstance(chosen, list) or not chosen:
        raise ConfigError(f"config benchmarks.{name}.protocols: a non-empty list, got {chosen!r}")
    known = protocol_names()
    for protocol in chosen:
        if protocol not in known:
            raise ConfigError(
                f"config benchmarks.{name}.protocols: unknown protocol {protocol!r}; known: {known}"
            )
    return list(chosen)


def protocol_steps(protocol: str, spec: dict[str, Any]) -> int:
    """Number of steps of ``protocol``'s chain for this benchmark spec."""
    _import_builtins()
    return int(_STEPS[protocol](spec))
