"""Jobs of the judge panel (rules judge_panel and judge_probe in rules/judge.smk): a shard's
answers judged by every panel judge, and a benchmark's false-positive probe judged by every panel
judge and the configured one. Logic: mnemoflow.eval.static_qa.panel and
mnemoflow.eval.static_qa.probes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from mnemoflow.data.tables import read_table, write_atomic_text, write_table
from mnemoflow.eval.static_qa.panel import (
    CONFIGURED,
    PanelJudge,
    judge_panel,
    judge_probes,
    probe_set,
)
from mnemoflow.jobs.context import JobEnv, log


def _panel(panel: list[dict[str, Any]]) -> list[PanelJudge]:
    return [PanelJudge(j["name"], j["kind"], dict(j["model"])) for j in panel]


async def _judged(env: JobEnv, judges: list[PanelJudge], ask) -> tuple[Any, dict[str, Any]]:
    """``ask(gateways)`` with one gateway per judge (its binding as the ``judge`` role), and
    each judge's ledger (calls, tokens, its binding; no key)."""
    gateways = {
        j.name: dataclasses.replace(env, models={"judge": j.model}).gateway() for j in judges
    }
    async with contextlib.AsyncExitStack() as stack:
        for gateway in gateways.values():
            await stack.enter_async_context(gateway)
        result = await ask(gateways)
    ledgers = {
        name: gateway.ledger.to_dict({"roles": gateway.describe()})
        for name, gateway in gateways.items()
    }
    return result, ledgers


def _write_ledgers(path: str, ledgers: dict[str, Any], **extra: Any) -> None:
    write_atomic_text(
        path, json.dumps({**extra, "judges": ledgers}, indent=2, sort_keys=True) + "\n"
    )
    for name, ledger in ledgers.items():
        totals = ledger["totals"]
        log.info(
            "judge %s: %d calls, %d cache hits, %d parse failures",
            name,
            totals["calls"],
            totals["cache_hits"],
            totals["parse_failures"],
        )


@dataclass(frozen=True)
class PanelFiles:
    questions: str
    answers: str
    panel_judgements: str
    ledger: str


def panel(files: PanelFiles, env: JobEnv, *, panel: list[dict[str, Any]]) -> None:
    """A shard's answers judged by every judge of ``judge.panel`` (``panel_judgements``)."""
    judges = _panel(panel)
    answers = read_table(files.answers, "answers")
    questions = read_table(files.questions, "questions")

    async def ask(gateways):
        return await judge_panel(judges, gateways, questions, answers, env.seed)

    frame, ledgers = asyncio.run(_judged(env, judges, ask))
    write_table(frame, files.panel_judgements, "panel_judgements")
    _write_ledgers(files.ledger, ledgers, stage="judge_panel", judgements=len(frame))


@dataclass(frozen=True)
class ProbeFiles:
    questions: str
    sessions: str
    probe_judgements: str
    ledger: str


def probe(
    files: ProbeFiles,
    env: JobEnv,
    *,
    panel: list[dict[str, Any]],
    configured: dict[str, Any],
    size: int,
) -> None:
    """The benchmark's false-positive probe (``size`` probes, seeded by ``env.seed``), judged
    by every panel judge and the configured one (``configured``: its kind and binding)."""
    judges = [PanelJudge(CONFIGURED, configured["kind"], dict(configured["model"])), *_panel(panel)]
    questions = read_table(files.questions, "questions")
    sessions = read_table(files.sessions, "sessions")
    probes = probe_set(questions, sessions, [j.kind for j in judges], size, env.seed)

    async def ask(gateways):
        return await judge_probes(judges, gateways, questions, probes, env.seed)

    frame, ledgers = asyncio.run(_judged(env, judges, ask))
    write_table(frame, files.probe_judgements, "probe_judgements")
    _write_ledgers(files.ledger, ledgers, stage="judge_probe", probes=len(probes))
    log.info("%d probes judged by %d judges", len(probes), len(judges))
