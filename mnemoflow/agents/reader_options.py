"""What the LoCoMo and LongMemEval readers share of their options: both are read from a
benchmark's ``reader:`` config block, strictly, and both cap the history they show in tokens."""

from __future__ import annotations

from typing import Any, Self

from mnemoflow.errors import ConfigError, reject_unknown


class ReaderOptions:
    """Base of a reader's frozen options dataclass: every field is a config key, and no other
    key is accepted."""

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> Self:
        raw = dict(raw or {})
        reject_unknown(raw, cls.__dataclass_fields__, "config reader")
        return cls(**raw)


def check_budget(budget_tokens: Any) -> None:
    """``budget_tokens``, the most history tokens a reader is shown, must be a positive integer."""
    if not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise ConfigError(f"config reader.budget_tokens: a positive integer, got {budget_tokens!r}")
