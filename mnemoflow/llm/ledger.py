"""A ledger of model calls: counts, cache hits, tokens and latency, per role and task.

Each rule writes its ledger beside its output, so the cost of every number in a report can be
traced. ``calls`` counts every request a stage made, ``cache_hits`` those answered from the cache,
and ``tokens_in``/``tokens_out`` only what the endpoint processed (cache misses): the ledger is a
cost account, so a fully cached rerun shows calls with zero tokens. ``retries`` counts failed
attempts that preceded successful replies; ``errors`` counts calls that failed for good.
``reasks`` counts requests asked again because their reply could not be parsed (or was empty);
``parse_failures`` the calls still unparseable after the last re-ask: they are results, never
silently replaced by a guess. ``dropped_events`` counts parts of a parsed reply its caller could
not apply (a memory writer's event naming an unknown id) while the rest of the reply was used.
``structured_output_fallbacks`` counts the endpoints a job found to reject ``response_format``
(``models.<role>.structured_output: auto``), under the role and task of the request that found
out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class LedgerEntry:
    calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    retries: int = 0
    errors: int = 0
    parse_failures: int = 0
    reasks: int = 0  # attempts asked again after an unparseable or empty reply
    dropped_events: int = 0  # parts of parsed replies that could not be applied
    #: endpoints found (once per job) to reject ``response_format``, then asked without it
    structured_output_fallbacks: int = 0


class Ledger:
    """Accumulates :class:`LedgerEntry` counters keyed by ``role/task``."""

    def __init__(self) -> None:
        self.entries: dict[str, LedgerEntry] = defaultdict(LedgerEntry)
        self.models: dict[str, str] = {}

    def record(
        self,
        role: str,
        task: str,
        *,
        model: str,
        cache_hit: bool,
        tokens_in: int,
        tokens_out: int,
        latency_s: float,
        retries: int = 0,
    ) -> None:
        entry = self.entries[f"{role}/{task}"]
        entry.calls += 1
        entry.cache_hits += int(cache_hit)
        if not cache_hit:  # tokens the endpoint processed; a cache hit costs none
            entry.tokens_in += tokens_in
            entry.tokens_out += tokens_out
        entry.latency_s += latency_s
        entry.retries += retries
        self.models[role] = model

    def record_error(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].errors += 1

    def record_reask(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].reasks += 1

    def record_structured_fallback(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].structured_output_fallbacks += 1

    def record_parse_failure(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].parse_failures += 1

    def record_dropped_events(self, role: str, task: str, n: int) -> None:
        self.entries[f"{role}/{task}"].dropped_events += n

    def totals(self) -> LedgerEntry:
        total = LedgerEntry()
        for entry in self.entries.values():
            for name, value in asdict(entry).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def to_dict(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            **(extra or {}),
            "models": dict(self.models),
            "totals": asdict(self.totals()),
            "by_role_task": {key: asdict(value) for key, value in sorted(self.entries.items())},
        }

    def to_json(self, extra: dict[str, Any] | None = None) -> str:
        return json.dumps(self.to_dict(extra), indent=2, sort_keys=True) + "\n"
