"""A memory system's parameters declared once each: default and check side by side.

:class:`~mnemoflow.memory.base.MemorySystem` reads ``defaults`` (merged under the configured
values) and ``params_schema`` (one JSON Schema per parameter); the built-in systems build both
from one table, so a default never drifts from its check.
"""

from __future__ import annotations

from typing import Any


class Param:
    """One parameter of a memory system, declared once: its default and the JSON Schema a
    configured value must meet (``type`` and further keywords such as ``minimum`` or ``enum``;
    none at all: unchecked)."""

    __slots__ = ("default", "schema")

    def __init__(self, default: Any, type: str | list[str] | None = None, **schema: Any):
        self.default = default
        self.schema: dict[str, Any] = {"type": type, **schema} if type is not None else schema


def declare_params(**table: Param) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A system's ``(defaults, params_schema)`` from one table of :class:`Param`, so that a
    parameter's default and its check stand in one place::

        defaults, params_schema = declare_params(top_k=Param(5, "integer", minimum=1))
    """
    defaults = {name: param.default for name, param in table.items()}
    return defaults, {name: param.schema for name, param in table.items() if param.schema}
