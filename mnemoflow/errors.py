"""Errors shared by every layer, so that no layer imports another just to raise one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class ConfigError(ValueError):
    """A config value is wrong (a role binding, a system's parameter, a benchmark entry); the
    message names the config key."""


def reject_unknown(
    given: Iterable[str], known: Iterable[str], where: str, *, list_known: bool = False
) -> None:
    """The strict config reader's one check: a key nobody reads is a typo, not a silent default.

    Raises ``ConfigError("<where>: unknown keys [...]")`` (with ``; known: [...]`` when
    ``list_known``), so every config section words the error the same way.
    """
    known = set(known)
    unknown = sorted(set(given) - known)
    if unknown:
        suffix = f"; known: {sorted(known)}" if list_known else ""
        raise ConfigError(f"{where}: unknown keys {unknown}{suffix}")


_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def check_types(given: Mapping[str, Any], defaults: Mapping[str, Any], where: str) -> None:
    """Each value in ``given`` of its default's type (a number where the default is a float,
    never ``true`` for a number), so a wrong type fails as ``<where>.<key>: an integer, got
    'two'`` when the config is read, not as a bare ``TypeError`` inside a comparison."""
    for key, value in given.items():
        kind = type(defaults.get(key))
        if kind not in _KIND_NAMES:
            continue  # no default, or a structured one: its owner checks it
        kinds = (int, float) if kind is float else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and kind is not bool):
            raise ConfigError(f"{where}.{key}: {_KIND_NAMES[kind]}, got {value!r}")
