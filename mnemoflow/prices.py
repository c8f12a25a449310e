"""Model prices (USD per million tokens) and context windows: one table, one price function.

The project ships a table of published prices (``data/model_prices.yaml``, each entry with the
date and source it was read from); the config's top-level ``prices:`` adds models or overrides
the table key by key (the user's entry wins). Every place that turns tokens into dollars calls
:func:`usd` with a table from :func:`price_table`: the gateway's ledgers, the report and the
summary (and a planner may do the same before a run).

A leaf module (standard library and ``errors`` only), so the gateway (``llm``) and the report
(which reads data only) both use it.

- ``input``: prompt tokens; ``cached_input``: prompt tokens the *provider* served from its own
  prompt cache (the endpoint reports them as ``usage.prompt_tokens_details.cached_tokens``);
  without it they cost ``input``; ``output``: completion tokens (reasoning included);
  ``batch_input`` / ``batch_output``: the same through the provider's Batch API (absent: a
  batch's price is unknown).
- mnemoflow's own response cache costs nothing: a cache hit has no tokens in the ledger.
- local backends (``offline``, ``sentence_transformers``) cost nothing: :data:`FREE_BACKENDS`.
- a model with no price has no cost (``None``), never a guess; a sum that includes one is unknown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from mnemoflow.errors import ConfigError

#: The shipped table.
TABLE = Path(__file__).resolve().parents[1] / "data" / "model_prices.yaml"
#: USD per million tokens.
PRICE_KEYS = ("input", "cached_input", "output", "batch_input", "batch_output")
#: What an entry of the shipped table holds besides prices.
TABLE_KEYS = (*PRICE_KEYS, "context_window", "date", "source")
#: Backends that run on this machine: their calls cost no dollars.
FREE_BACKENDS = ("offline", "sentence_transformers")
#: The model name the embedded offline backend answers as (``llm.types.OFFLINE_MODEL``): a reply
#: that names it cost nothing, wherever only the reply's model is known.
FREE_MODELS = ("offline-heuristic",)

#: A snapshot date or a "-latest" alias after a model's name.
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@lru_cache(maxsize=1)
def shipped() -> dict[str, dict[str, Any]]:
    """The shipped table, checked: model -> {input, cached_input?, output, context_window?, date,
    source}."""
    import yaml

    raw = yaml.safe_load(TABLE.read_text(encoding="utf-8")) or {}
    models = raw.get("models")
    if not isinstance(models, dict):
        raise ConfigError(f"{TABLE}: 'models' must be a mapping of model -> entry")
    for _, entry, where in _entries(models, f"{TABLE}: models", TABLE_KEYS):
        for key in ("date", "source"):
            if not entry.get(key):
                raise ConfigError(f"{where}.{key}: required (where and when the price was read)")
        _check_price(entry, where, complete=True)
        window = entry.get("context_window")
        if window is not None and (not isinstance(window, int) or window < 1):
            raise ConfigError(f"{where}.context_window: a positive integer, got {window!r}")
    return models


def _entries(models: Mapping[str, Any], where: str, keys: tuple[str, ...]):
    """``(model, entry, where)`` per model of a model -> entry table, each entry a mapping of known
    ``keys`` (else a one-line error naming ``<where>.<model>``)."""
    for model, entry in models.items():
        here = f"{where}.{model}"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{here}: a mapping of {list(keys)}, got {entry!r:.60}")
        unknown = sorted(set(entry) - set(keys))
        if unknown:
            raise ConfigError(f"{here}: unknown keys {unknown}; known: {list(keys)}")
        yield model, entry, here


def _check_price(entry: Mapping[str, Any], where: str, complete: bool) -> None:
    for key in PRICE_KEYS:
        value = entry.get(key)
        if value is None:
            if complete and key in ("input", "output"):
                raise ConfigError(f"{where}.{key}: required (USD per million tokens)")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ConfigError(
                f"{where}.{key}: a number >= 0 (USD per million tokens), got {value!r}"
            )
        if math.isinf(value):
            raise ConfigError(f"{where}.{key}: a finite number, got {value!r}")


def price_table(user: Mapping[str, Any] | None = None) -> dict[str, dict[str, float]]:
    """model -> {input, cached_input?, output}: the shipped table with the config's ``prices:``
    merged over it key by key (a user entry for a model not in the table names input and
    output). Errors are one line naming ``prices.<model>.<key>``."""
    table = {
        model: {k: float(v) for k, v in entry.items() if k in PRICE_KEYS}
        for model, entry in shipped().items()
    }
    if user is None:
        return table
    if not isinstance(user, Mapping):
        raise ConfigError(f"config prices: a mapping of model -> prices, got {type(user).__name__}")
    for model, entry, where in _entries(user, "config prices", PRICE_KEYS):
        merged = {**table.get(str(model), {}), **{k: v for k, v in entry.items() if v is not None}}
        _check_price(merged, where, complete=True)
        table[str(model)] = {k: float(v) for k, v in merged.items()}
    return table


def lookup(model: str, table: Mapping[str, Any]) -> Any:
    """``table``'s entry for ``model``: its own name first, then without a date or ``-latest``
    suffix (``gpt-4o-2024-08-06`` -> ``gpt-4o``, ``claude-sonnet-4-20250514`` ->
    ``claude-sonnet-4``, ``claude-3-5-haiku-latest`` -> ``claude-3-5-haiku``)."""
    if model in table:
        return table[model]
    base = _DATED.sub("", model)
    return table.get(base) if base != model else None


def usd(
    model: str,
    tokens_in: int,
    cached_in: int,
    tokens_out: int,
    table: Mapping[str, Mapping[str, float]] | None = None,
) -> float | None:
    """Dollars of ``tokens_in`` prompt tokens (``cached_in`` of them from the provider's prompt
    cache) and ``tokens_out`` completion tokens of ``model``; ``None`` when it has no price.

    >>> table = {"m": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    >>> usd("m", 1_000_000, 200_000, 500_000, table)  # 0.8 M x 2 + 0.2 M x 0.5 + 0.5 M x 8
    5.7
    """
    price = lookup(model, price_table() if table is None else table)
    if price is None:
        return None
    cached = min(max(cached_in, 0), tokens_in)
    cached_rate = price.get("cached_input")
    cached_rate = price["input"] if cached_rate is None else cached_rate
    total = (tokens_in - cached) * price["input"] + cached * cached_rate
    return round((total + tokens_out * price["output"]) / 1e6, 9)


def batch_usd(
    model: str,
    tokens_in: int,
    tokens_out: int,
    table: Mapping[str, Mapping[str, float]] | None = None,
) -> float | None:
    """Dollars of a reply through a provider's Batch API, at ``batch_input`` / ``batch_output``;
    ``None`` when the model has no batch price (never a guessed discount).

    >>> usd_table = {"m": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}
    >>> batch_usd("m", 1_000_000, 500_000, usd_table)
    3.0
    """
    price = lookup(model, price_table() if table is None else table)
    if price is None or price.get("batch_input") is None or price.get("batch_output") is None:
        return None
    return round((tokens_in * price["batch_input"] + tokens_out * price["batch_output"]) / 1e6, 9)


def context_window(model: str) -> int | None:
    """The shipped table's context window of ``model`` (tokens of prompt + completion), if any."""
    entry = lookup(model, shipped())
    return None if entry is None else entry.get("context_window")
