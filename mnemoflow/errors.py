"""Errors shared by every layer, so that no layer imports another just to raise one."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value is wrong (a role binding, a system's parameter, a benchmark entry); the
    message names the config key."""
