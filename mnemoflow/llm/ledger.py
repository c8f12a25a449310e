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
``structured_output_fallbacks`` counts the forms of ``response_format`` a job found an endpoint
to refuse (``models.<role>.structured_output: auto`` steps down one form per refusal, once per
job and endpoint), under the role and task of the request that found out; ``structured_output``
(by role) names the form each role's requests ended on (the weakest sent: ``json_schema``,
``json_object`` or ``none``; roles that never ask for structured output are absent).

``cached_in`` counts the prompt tokens the provider served from its own prompt cache (part of
``tokens_in``), and ``usd`` the dollars of the tokens the endpoint processed, at the prices known
when the job ran (:func:`mnemoflow.prices.usd`, keyed by the model the role binds): 0 for local
backends and for cache hits, ``None`` (unknown) once a call to a model without a price processed
tokens. ``truncated_calls`` / ``truncated_messages`` count the prompts cut to the role's context
window (``overflow: truncate_oldest``) and the history messages dropped; ``truncated_items`` names
the items (questions, users) they belonged to, with the messages dropped for each.
``overflow_failures`` counts the calls not sent because their prompt did not fit (``overflow:
fail``): their items failed, and ``failed_items`` names each with the one-line reason.
``batch_calls`` / ``batch_tokens_in`` / ``batch_tokens_out`` count the calls answered through a
Batch-API batch (part of ``calls`` and the tokens, priced at ``batch_input`` / ``batch_output``),
``batch_ids`` names those batches; ``batch_errors`` counts requests a batch failed or left
unanswered, ``batch_resubmitted`` / ``batch_online`` what was done with them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from mnemoflow.llm.structured import weakest
from mnemoflow.prices import batch_usd, usd


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
    #: forms of ``response_format`` found (once per job and endpoint) refused, then stepped down
    structured_output_fallbacks: int = 0
    cached_in: int = 0  # prompt tokens served by the provider's prompt cache (in tokens_in)
    usd: float | None = 0.0  # dollars of what the endpoint processed; None: a model without price
    truncated_calls: int = 0  # prompts cut to the context window (overflow: truncate_oldest)
    truncated_messages: int = 0  # history messages dropped from them
    overflow_failures: int = 0  # calls not sent, over the context window (overflow: fail)
    batch_calls: int = 0  # calls (in ``calls``) answered through a Batch-API batch
    batch_tokens_in: int = 0  # their prompt tokens (in ``tokens_in``)
    batch_tokens_out: int = 0  # their completion tokens (in ``tokens_out``)
    batch_errors: int = 0  # requests a batch failed or left unanswered (expired)
    batch_resubmitted: int = 0  # of those, sent again in a later batch
    batch_online: int = 0  # of those, asked online instead (batch_fallback: online)

    def add_usd(self, dollars: float | None) -> None:
        self.usd = None if self.usd is None or dollars is None else round(self.usd + dollars, 9)


class Ledger:
    """Accumulates :class:`LedgerEntry` counters keyed by ``role/task``.

    ``prices``: the price table (``mnemoflow.prices.price_table``) the ``usd`` counters use.
    """

    def __init__(self, prices: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.entries: dict[str, LedgerEntry] = defaultdict(LedgerEntry)
        self.models: dict[str, str] = {}
        self.prices = prices
        #: item -> history messages dropped from its prompts (``overflow: truncate_oldest``)
        self.truncated_items: dict[str, int] = defaultdict(int)
        #: item -> why its call was not sent (``overflow: fail``): the item failed
        self.failed_items: dict[str, str] = {}
        #: role -> the weakest form of ``response_format`` its requests were sent in
        self.structured_forms: dict[str, str] = {}
        #: the Batch-API batches the job's replies came through
        self.batch_ids: set[str] = set()

    def copy(self) -> Ledger:
        """An independent copy (the same price table): what a Batch-API pass starts from."""
        other = Ledger(self.prices)
        other.entries.update({key: replace(entry) for key, entry in self.entries.items()})
        other.models = dict(self.models)
        other.truncated_items.update(self.truncated_items)
        other.failed_items = dict(self.failed_items)
        other.structured_forms = dict(self.structured_forms)
        other.batch_ids = set(self.batch_ids)
        return other

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
        cached_in: int = 0,
        priced_as: str | None = None,
    ) -> None:
        """``priced_as``: the model name the role binds, which prices are keyed by (``None``: a
        local backend, which costs nothing)."""
        entry = self.entries[f"{role}/{task}"]
        entry.calls += 1
        entry.cache_hits += int(cache_hit)
        if not cache_hit:  # tokens the endpoint processed; a cache hit costs none
            entry.tokens_in += tokens_in
            entry.tokens_out += tokens_out
            entry.cached_in += cached_in
            self._charge(entry, priced_as, tokens_in, cached_in, tokens_out)
        entry.latency_s += latency_s
        entry.retries += retries
        self.models[role] = model

    def record_batch(
        self,
        role: str,
        task: str,
        *,
        model: str,
        tokens_in: int,
        tokens_out: int,
        batch_id: str,
        priced_as: str | None,
    ) -> None:
        """A reply that came through a Batch-API batch: a call at the model's batch prices."""
        entry = self.entries[f"{role}/{task}"]
        entry.calls += 1
        entry.batch_calls += 1
        entry.tokens_in += tokens_in
        entry.tokens_out += tokens_out
        entry.batch_tokens_in += tokens_in
        entry.batch_tokens_out += tokens_out
        if priced_as is not None:
            entry.add_usd(batch_usd(priced_as, tokens_in, tokens_out, self.prices))
        self.batch_ids.add(batch_id)
        self.models[role] = model

    def record_embeddings(
        self,
        role: str,
        *,
        model: str,
        texts: int,
        computed: int,
        tokens_in: int,
        latency_s: float,
        priced_as: str | None,
    ) -> None:
        """``texts`` embedded, ``computed`` of them by the endpoint (``tokens_in`` its reported
        prompt tokens), the rest from the cache."""
        entry = self.entries[f"{role}/embed"]
        entry.calls += texts
        entry.cache_hits += texts - computed
        entry.tokens_in += tokens_in
        entry.latency_s += latency_s
        if computed:
            self._charge(entry, priced_as, tokens_in, 0, 0)
        self.models[role] = model

    def _charge(
        self, entry: LedgerEntry, model: str | None, tokens_in: int, cached: int, out: int
    ) -> None:
        if model is not None:
            entry.add_usd(usd(model, tokens_in, cached, out, self.prices))

    def record_truncation(self, role: str, task: str, item: str, dropped: int) -> None:
        entry = self.entries[f"{role}/{task}"]
        entry.truncated_calls += 1
        entry.truncated_messages += dropped
        self.truncated_items[item] += dropped

    def record_overflow_failure(self, role: str, task: str, item: str, reason: str) -> None:
        self.entries[f"{role}/{task}"].overflow_failures += 1
        self.failed_items.setdefault(item, reason)

    def record_error(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].errors += 1

    def record_reask(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].reasks += 1

    def record_structured_fallback(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].structured_output_fallbacks += 1

    def record_structured_form(self, role: str, form: str) -> None:
        known = self.structured_forms.get(role)
        self.structured_forms[role] = weakest([form] if known is None else [known, form])

    def record_parse_failure(self, role: str, task: str) -> None:
        self.entries[f"{role}/{task}"].parse_failures += 1

    def record_dropped_events(self, role: str, task: str, n: int) -> None:
        self.entries[f"{role}/{task}"].dropped_events += n

    def totals(self) -> LedgerEntry:
        total = LedgerEntry()
        for entry in self.entries.values():
            for name, value in asdict(entry).items():
                if name == "usd":
                    total.add_usd(value)
                else:
                    setattr(total, name, getattr(total, name) + value)
        return total

    def to_dict(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        data = {
            **(extra or {}),
            "models": dict(self.models),
            "totals": asdict(self.totals()),
            "by_role_task": {key: asdict(value) for key, value in sorted(self.entries.items())},
        }
        if self.truncated_items:
            data["truncated_items"] = dict(sorted(self.truncated_items.items()))
        if self.failed_items:
            data["failed_items"] = dict(sorted(self.failed_items.items()))
        if self.structured_forms:
            data["structured_output"] = dict(sorted(self.structured_forms.items()))
        if self.batch_ids:
            data["batch_ids"] = sorted(self.batch_ids)
        return data

    def to_json(self, extra: dict[str, Any] | None = None) -> str:
        return json.dumps(self.to_dict(extra), indent=2, sort_keys=True) + "\n"
