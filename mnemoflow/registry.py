"""Things found by name (memory systems, benchmark loaders, protocols, judges, metrics, MemoryBench
metric families, CLI commands), all through one :class:`Registry` shape.

A module registers its entries when it is imported; a registry imports its built-in modules the
first time it is asked, so a lookup never depends on what happened to be imported before. A kind
that accepts third-party entries also finds them through an entry-point group and, if it allows
``package.module:attr`` paths in config, through the path.

This module imports nothing but :mod:`mnemoflow.errors`, so every layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from mnemoflow.errors import ConfigError


class Entry(NamedTuple):
    """A registered object and the facts it was registered with (``steps=``, ``help=``, ...)."""

    value: Any
    info: dict[str, Any]


class Registry:
    """Named entries of one kind.

    ``kind`` names it in errors ("unknown memory system 'x'; available: [...]");
    ``builtin_modules`` register the built-in entries when imported; ``entry_points`` is the
    group installed packages add entries through (never replacing a built-in name);
    ``base``, when given, is the class an entry found by path or entry point must subclass, and
    allows ``package.module:attr`` paths as names.
    """

    def __init__(
        self,
        kind: str,
        builtin_modules: Sequence[str] = (),
        *,
        entry_points: str | None = None,
        base: type | None = None,
    ) -> None:
        self.kind = kind
        self.builtin_modules = tuple(builtin_modules)
        self.entry_points = entry_points
        self.base = base
        #: name -> Entry, in registration order.
        self.entries: dict[str, Entry] = {}
        self._imported = False

    def register(self, name: str, **info: Any) -> Callable[[Any], Any]:
        """Decorator: register the decorated object as ``name``, with ``info``."""

        def decorator(value: Any) -> Any:
            self.entries[name] = Entry(value, info)
            return value

        return decorator

    def _import_builtins(self) -> None:
        if not self._imported:
            for module in self.builtin_modules:
                importlib.import_module(module)
            self._imported = True

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._import_builtins()
        return sorted(self.entries)

    def __contains__(self, name: object) -> bool:
        self._import_builtins()
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entry(self, name: str) -> Entry:
        """The entry of ``name`` (or a ``module:attr`` path); ConfigError naming the known ones."""
        self._import_builtins()
        if self.base is not None and ":" in name:
            return Entry(self._from_path(name), {})
        if name not in self.entries and self.entry_points:
            self._load_entry_points()
        if name not in self.entries:
            raise ConfigError(f"unknown {self.kind} {name!r}; available: {self.names()}")
        return self.entries[name]

    def get(self, name: str) -> Any:
        """The object registered as ``name``."""
        return self.entry(name).value

    def info(self, name: str) -> dict[str, Any]:
        """What ``name`` was registered with."""
        return self.entry(name).info

    def _checked(self, value: Any, where: str) -> Any:
        if self.base is not None and not (isinstance(value, type) and issubclass(value, self.base)):
            raise ConfigError(f"{where} is not a {self.base.__name__} subclass")
        return value

    def _from_path(self, path: str) -> Any:
        module_name, _, attr = path.partition(":")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{self.kind} class {path!r} cannot be imported: {exc}") from exc
        return self._checked(value, f"{self.kind} class {path!r}")

    def _load_entry_points(self) -> None:
        for point in importlib.metadata.entry_points(group=self.entry_points):
            where = f"entry point {point.name!r} ({point.value}) of group {self.entry_points!r}"
            try:
                value = point.load()
            except (ImportError, AttributeError) as exc:
                raise ConfigError(f"{where} cannot be loaded: {exc}") from exc
            self.entries.setdefault(point.name, Entry(self._checked(value, where), {}))
