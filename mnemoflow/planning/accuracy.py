"""A plan held against the ledgers of the run it planned: calls and tokens per (benchmark, role).

The plan's promise is per (configured benchmark, role), summed over systems, protocols and steps;
the ledgers are summed the same way (the embedder in texts, as the ledger counts it). Used by the
tests that pin the plan's accuracy per family and by docs/plan.md's measured ratios.

Both count a request the response cache answers as a call with no tokens. The plan foresees the
hits of requests it can see repeat (the same prompt asked by several systems, steps or
protocols); a reply that happens to be the same for different prompts makes the next request of
a dialogue repeat too, which no plan can foresee (the offline model does that often: "I don't
know." to every question it has no context for). So tokens are also compared per computed call
(``tokens_in/computed``: plan / ledgers of tokens over calls less cache hits), which holds the
prompts and replies the plan renders whatever the cache served; ``computed`` is the ratio of
calls less cache hits.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: What is compared, in the ledger's own names.
MEASURES = ("calls", "tokens_in", "tokens_out")
#: What is summed: the measures and the calls the cache answers.
SUMMED = (*MEASURES, "cache_hits")


def ledger_totals(results: Path | str) -> dict[tuple[str, str], dict[str, float]]:
    """Every ledger under ``results`` summed per (benchmark, role); the benchmark is the folder
    right under ``results`` (or under a repeat's ``seed{S}/``)."""
    results = Path(results)
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for path in sorted(results.glob("**/*.ledger.json")):
        parts = path.relative_to(results).parts
        if parts and parts[0].startswith("seed") and parts[0][4:].isdigit():
            parts = parts[1:]
        if len(parts) < 2:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, entry in (data.get("by_role_task") or {}).items():
            role = key.partition("/")[0]
            for name in SUMMED:
                out[(parts[0], role)][name] += entry.get(name, 0)
    return dict(out)


def planned_totals(plan: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, float]]:
    """A plan's ``runs[]`` (``plan --json``) summed per (benchmark, role)."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for run in plan["runs"]:
        for name in SUMMED:
            out[(run["benchmark"], run["role"])][name] += run.get(name, 0)
    return dict(out)


def ratios(
    plan: Mapping[str, Any], results: Path | str, least: int = 20
) -> dict[tuple[str, str], dict[str, float]]:
    """plan / ledgers per (benchmark, role) and measure, for the pairs with at least ``least``
    calls in the ledgers (a measure the ledgers have none of is left out): the measures, the
    computed calls and the tokens per computed call (``<measure>/computed``)."""
    planned, recorded = planned_totals(plan), ledger_totals(results)
    out = {}
    for pair, ledger in sorted(recorded.items()):
        if ledger["calls"] < least:
            continue
        mine = planned.get(pair, dict.fromkeys(SUMMED, 0))
        ratio = {name: round(mine[name] / ledger[name], 3) for name in MEASURES if ledger[name]}
        computed = (mine["calls"] - mine["cache_hits"], ledger["calls"] - ledger["cache_hits"])
        if computed[1] > 0:
            ratio["computed"] = round(computed[0] / computed[1], 3)
        for name in ("tokens_in", "tokens_out"):
            if ledger[name] and computed[0] > 0:
                per = (mine[name] / computed[0]) / (ledger[name] / computed[1])
                ratio[f"{name}/computed"] = round(per, 3)
        out[pair] = ratio
    return out
