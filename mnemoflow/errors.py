"""Errors shared by every layer, so that no layer imports another just to raise one."""

from __future__ import annotations

from collections.abc import Iterable


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
