"""Protocols by name: which step chain a benchmark runs, and how many steps it has.

A benchmark's spec names its protocols (``protocols: [on_policy, off_policy]``; default the
static ``qa`` chain). Each protocol writes, for every (benchmark, system, step), the run's
``scores.parquet`` and ``diagnosis.parquet`` under ``results/{benchmark}/{system}/{protocol}/
step{k}/``, which ``summarize`` collects. Adding a protocol touches one module: register it
with its step counter (:func:`register_protocol`) and name the module in :data:`PROTOCOLS`'
built-in modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemoflow.data.registry import n_steps
from mnemoflow.errors import ConfigError
from mnemoflow.registry import Registry

StepCounter = Callable[[dict[str, Any]], int]

#: Protocols by name, each a step counter ``steps(spec)``; the static ``qa`` chain has the loader's.
PROTOCOLS = Registry(
    "protocol",
    builtin_modules=["mnemoflow.protocols.feedback", "mnemoflow.protocols.interactive"],
)
PROTOCOLS.register("qa")(n_steps)


def register_protocol(name: str, steps: StepCounter) -> None:
    """Register a protocol; ``steps(spec)`` is its number of steps for a benchmark spec."""
    PROTOCOLS.register(name)(steps)


def protocol_names() -> list[str]:
    return PROTOCOLS.names()


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
    return int(PROTOCOLS.get(protocol)(spec))
