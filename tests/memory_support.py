"""Helpers shared by the memory-system tests: a gateway, unified tables -> messages, recall@k."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import MemorySystem, Message, build
from mnemoflow.protocols.static_qa import to_messages
from tests.shared_data import REPO  # noqa: F401  (importers take REPO from here)


def gateway(cache: Path | None = None, embedder: dict[str, Any] | None = None) -> Gateway:
    return Gateway.from_config({"embedder": embedder} if embedder else {}, cache_path=cache)


def messages(turns: pd.DataFrame) -> list[Message]:
    return to_messages(turns)


def synthetic(**params: Any):
    return load_benchmark({"loader": "synthetic", "params": params})


def run(coro):
    return asyncio.run(coro)


async def recall_by_step(
    spec: dict[str, Any],
    prepared,
    llm: Gateway,
    k: int,
    episodes: list[str] | None = None,
    unit: str = "message",
) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    """Evidence recall@k of each question with evidence, and a random ranking's expectation.

    Each episode's memory receives its sessions step by step; a question is asked after the step
    it checks (``checkpoint``). Only the system's ranked hits count (score > 0 or not a
    local-window item), so the number measures retrieval, not what was shown anyway. Random
    ranking of the N messages (or sessions, ``unit="session"``) ingested so far retrieves an
    evidence turn with probability k / N.
    """
    sessions, questions = prepared.sessions, prepared.questions
    recalls, randoms, rows = [], [], []
    for episode in episodes or sorted(sessions.episode_id.unique()):
        system: MemorySystem = build(spec, llm=llm, seed=0)
        turns = sessions[sessions.episode_id == episode].sort_values(
            ["session_index", "turn_index"]
        )
        mine = questions[questions.episode_id == episode]
        seen, seen_sessions = 0, 0
        for step in sorted(turns.step.unique()):
            batch = turns[turns.step == step]
            seen += len(batch)
            seen_sessions += batch.session_id.nunique()
            await system.add(messages(batch))
            for q in mine[mine.checkpoint == step].itertuples(index=False):
                evidence = list(q.evidence_ids)
                if not evidence:
                    continue
                items = [
                    i
                    for i in await system.retrieve(q.question, k)
                    if not i.id.startswith("window:")
                ]
                got = {s for item in items[:k] for s in item.source_ids}
                recall = sum(e in got for e in evidence) / len(evidence)
                recalls.append(recall)
                pool = seen_sessions if unit == "session" else seen
                randoms.append(min(1.0, k / pool))
                rows.append(
                    {"question_id": q.question_id, "type": q.question_type, "recall": recall}
                )
    return recalls, randoms, rows
