"""A plan: lines of expected model calls, their totals, dollars and wall time, as text or JSON.

Names are the ledger's (``calls``, ``cache_hits``, ``tokens_in``, ``tokens_out``, ``usd``):
``calls`` counts every request a stage will make, ``cache_hits`` those the response cache already
answers, and tokens and dollars only the rest (what the endpoint will process), as in a ledger.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import EndpointSpec, binding_text
from mnemoflow.prices import FREE_BACKENDS, batch_usd, usd

#: Seconds per call assumed for an endpoint with neither ``plan.latency_s`` nor an earlier ledger.
ASSUMED_LATENCY_S = 2.0

TOTAL_KEYS = ("calls", "cache_hits", "tokens_in", "tokens_out")


@dataclass
class Line:
    """Expected calls of one role/task in one benchmark x system x protocol.

    ``exact``: the count is determined by the data (static QA's answers and judgements); else it
    depends on what a model says and is an expected value (``note`` says why). ``rendered``:
    calls whose prompts were rendered with the code that sends them (their cache status is known);
    the others' prompts are estimated and counted as cache misses.
    """

    benchmark: str
    system: str
    protocol: str
    role: str
    task: str
    calls: float = 0.0
    cache_hits: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    #: of ``tokens_in``, those a provider's prefix cache is expected to serve (the share an
    #: unbounded cache would: ``llm.prefix_dispatch.shared_fraction``)
    cached_in: float = 0.0
    overflows: float = 0.0
    exact: bool = True
    rendered: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: where the count depends on what a model says and has bounds (live dialogues)
    calls_min: float | None = None
    calls_max: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.benchmark, self.system, self.protocol, self.role, self.task)

    def add(self, other: Line) -> None:
        for name in (*TOTAL_KEYS, "cached_in", "overflows", "rendered"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.exact = self.exact and other.exact
        for name in ("calls_min", "calls_max"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is not None or theirs is not None:
                low = self.calls - other.calls if mine is None else mine
                setattr(self, name, low + (other.calls if theirs is None else theirs))
        self.notes.extend(n for n in other.notes if n not in self.notes)


@dataclass
class Plan:
    """The lines of a run, the jobs per rule, and what the plan leaves out."""

    specs: Mapping[str, EndpointSpec]
    prices: Mapping[str, Mapping[str, float]]
    lines: dict[tuple, Line] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    #: rule -> jobs of model-calling rules this plan does not estimate
    unplanned: dict[str, int] = field(default_factory=dict)
    #: role -> (seconds per call, where it came from)
    latency: dict[str, tuple[float, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, line: Line) -> None:
        if line.key in self.lines:
            self.lines[line.key].add(line)
        else:
            self.lines[line.key] = line

    # ---- money and time ------------------------------------------------------------------------

    def line_usd(self, line: Line) -> float | None:
        spec = self.specs[line.role]
        if spec.backend in FREE_BACKENDS:
            return 0.0
        return usd(spec.model, round(line.tokens_in), 0, round(line.tokens_out), self.prices)

    def line_usd_batch(self, line: Line) -> float | None:
        """The line's dollars through the provider's Batch API (Batch-API mode)."""
        return self._batch(line.role, round(line.tokens_in), round(line.tokens_out))

    def _batch(self, role: str, tokens_in: int, tokens_out: int) -> float | None:
        spec = self.specs[role]
        if spec.backend in FREE_BACKENDS:
            return 0.0
        return batch_usd(spec.model, tokens_in, tokens_out, self.prices)

    def by_role(self) -> dict[str, dict[str, Any]]:
        roles: dict[str, dict[str, Any]] = {}
        for line in self.lines.values():
            entry = roles.setdefault(
                line.role, {"calls": 0.0, "cache_hits": 0.0, "tokens_in": 0.0, "tokens_out": 0.0}
            )
            for name in TOTAL_KEYS:
                entry[name] += getattr(line, name)
            entry["cached_in"] = entry.get("cached_in", 0.0) + line.cached_in
        for role, entry in roles.items():
            spec = self.specs[role]
            for name in (*TOTAL_KEYS, "cached_in"):
                entry[name] = round(entry[name])
            entry["usd"] = (
                0.0
                if spec.backend in FREE_BACKENDS
                else usd(spec.model, entry["tokens_in"], 0, entry["tokens_out"], self.prices)
            )
            entry["usd_batch"] = self._batch(role, entry["tokens_in"], entry["tokens_out"])
        return dict(sorted(roles.items()))

    def unpriced(self) -> list[str]:
        """Models of paid backends the plan sends tokens to without a price."""
        return sorted(
            {
                f"{role} ({self.specs[role].model})"
                for role, entry in self.by_role().items()
                if entry["usd"] is None and entry["tokens_in"] + entry["tokens_out"] > 0
            }
        )

    def usd(self) -> float | None:
        values = [entry["usd"] for entry in self.by_role().values()]
        return None if any(v is None for v in values) else round(sum(values), 6)

    def endpoints(self) -> dict[str, dict[str, Any]]:
        """Wall time per endpoint: its requests x seconds per request / its concurrency (an
        OpenAI-compatible embedder sends ``embed_batch`` texts a request)."""
        misses: dict[str, float] = defaultdict(float)
        for line in self.lines.values():
            misses[line.role] += line.calls - line.cache_hits
        out: dict[str, dict[str, Any]] = {}
        for role, n in sorted(misses.items()):
            spec = self.specs[role]
            name = (spec.base_url or spec.backend).rstrip("/")
            seconds, source = self.latency.get(role, (0.0, "local"))
            entry = out.setdefault(
                name, {"roles": [], "concurrency": spec.concurrency, "calls": 0, "seconds": 0.0}
            )
            entry["roles"].append(f"{role}: {seconds:g} s/call ({source})")
            entry["concurrency"] = min(entry["concurrency"], spec.concurrency)
            entry["calls"] += round(n)
            entry["seconds"] += requests(role, spec, n) * seconds
        for entry in out.values():
            entry["hours"] = round(entry.pop("seconds") / max(1, entry["concurrency"]) / 3600, 4)
        return out

    def hours(self) -> float:
        """The endpoints' hours added up: an upper bound where endpoints work at the same time."""
        return round(sum(e["hours"] for e in self.endpoints().values()), 4)

    # ---- output --------------------------------------------------------------------------------

    def overflows(self) -> dict[str, int]:
        counts: dict[str, float] = defaultdict(float)
        for line in self.lines.values():
            counts[line.role] += line.overflows
        return {role: math.ceil(n) for role, n in sorted(counts.items()) if n}

    def to_dict(self) -> dict[str, Any]:
        roles = self.by_role()
        totals = {name: sum(r[name] for r in roles.values()) for name in TOTAL_KEYS}
        # usd_batch is per run and role only: not every role can go through a batch
        return {
            "jobs": sum(self.jobs.values()),
            **totals,
            "usd": self.usd(),
            "hours": self.hours(),
            "by_role": roles,
            # each role's endpoint host, or offline said aloud (llm.types.binding_text)
            "bindings": {role: binding_text(self.specs[role]) for role in roles},
            "jobs_by_rule": dict(sorted(self.jobs.items())),
            "overflows": self.overflows(),
            "endpoints": self.endpoints(),
            "runs": [
                {
                    "benchmark": line.benchmark,
                    "system": line.system,
                    "protocol": line.protocol,
                    "role": line.role,
                    "task": line.task,
                    **{name: round(getattr(line, name)) for name in TOTAL_KEYS},
                    "cached_in": round(line.cached_in),
                    "usd": self.line_usd(line),
                    "usd_batch": self.line_usd_batch(line),
                    "count": "exact" if line.exact else "expected",
                    **(
                        {"min": round(line.calls_min), "max": round(line.calls_max)}
                        if line.calls_min is not None and line.calls_max is not None
                        else {}
                    ),
                    "prompts": _prompts(line),
                    "notes": line.notes,
                }
                for line in sorted(self.lines.values(), key=lambda line: line.key)
            ],
            "unplanned": dict(sorted(self.unplanned.items())),
            "unpriced": self.unpriced(),
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def render(self) -> str:
        data = self.to_dict()
        out = ["Jobs per rule: " + _jobs_text(data["jobs_by_rule"])]
        rows = [
            [
                f"{r['benchmark']}/{r['system']}/{r['protocol']}",
                f"{r['role']}/{r['task']}",
                f"{r['calls']:,}"
                + ("" if r["count"] == "exact" else " (exp.)")
                + (f" [{r['min']:,}-{r['max']:,}]" if "min" in r else ""),
                f"{r['cache_hits']:,}",
                f"{r['tokens_in']:,}",
                f"{r['tokens_out']:,}",
                _money(r["usd"]),
                r["prompts"],
            ]
            for r in data["runs"]
        ]
        head = ["run", "role/task", "calls", "cached", "tokens in", "tokens out", "USD", "prompts"]
        out += ["", *_table(head, rows)]
        role_rows = [
            [
                role,
                f"{e['calls']:,}",
                f"{e['cache_hits']:,}",
                f"{e['tokens_in']:,}",
                f"{e['tokens_out']:,}",
                _money(e["usd"]),
                _money(e["usd_batch"]) + (" (batch: true)" if self.specs[role].batch else ""),
                str(data["overflows"].get(role, 0)),
            ]
            for role, e in data["by_role"].items()
        ]
        head = ["role", "calls", "cached", "tokens in", "tokens out", "USD", "USD Batch-API"]
        head.append("overflow")
        out += ["", *_table(head, role_rows)]
        out.append("")
        out += [f"role {role}: {text}" for role, text in data["bindings"].items()]
        for name, e in data["endpoints"].items():
            roles = "; ".join(e["roles"])
            out.append(
                f"endpoint {name}: {e['calls']:,} calls at concurrency {e['concurrency']} "
                f"-> {e['hours']:.3f} h ({roles})"
            )
        out.append(
            f"total: {data['jobs']} jobs, {data['calls']:,} calls ({data['cache_hits']:,} cached), "
            f"{data['tokens_in']:,} tokens in, {data['tokens_out']:,} out, "
            f"{_money(data['usd'])}, {data['hours']:.3f} h"
        )
        if data["unpriced"]:
            out.append(f"no price for {', '.join(data['unpriced'])}: set prices: in config")
        if data["unplanned"]:
            out.append(
                "not estimated (their calls are not in the totals): "
                + _jobs_text(data["unplanned"])
            )
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def requests(role: str, spec: EndpointSpec, texts: float) -> float:
    """Requests an endpoint gets for ``texts`` calls of ``role``: an OpenAI-compatible embedder
    sends :attr:`OpenAIBackend.embed_batch` texts a request, every other call is one."""
    if role == "embedder" and spec.backend == "openai":
        return math.ceil(texts / OpenAIBackend.embed_batch)
    return texts


def _prompts(line: Line) -> str:
    if not line.calls:
        return "-"
    if line.rendered >= line.calls - 1e-9:
        return "rendered"
    return "estimated" if not line.rendered else "partly rendered"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def _jobs_text(jobs: Mapping[str, int]) -> str:
    return ", ".join(f"{rule} {n}" for rule, n in jobs.items()) or "none"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*head), *(fmt.format(*row) for row in rows)]
