"""The memory products' shared fixtures: one conversation, its questions, and the steps every
product's tests take (ingest, save and load, a cached rerun, two episodes at once, an endpoint, a
missing install, the AMemGym step chain, a tiny workflow run). The assertions stay in each
product's test module; these only run the product.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import Message, build
from tests.test_interactive import gateway as interactive_gateway
from tests.test_interactive import run_chain
from tests.test_interactive import users as users  # noqa: PLC0414  (a fixture, re-exported)
from tests.workflow import TINY, snakemake, workdir


def _turn(turn_id: str, role: str, content: str, speaker: str, time: str) -> Message:
    return Message(turn_id, turn_id.split(":")[0], role, content, speaker, time)


CONVERSATION = [
    _turn("D1:1", "user", "My favorite color is teal.", "Caroline", "2023-05-08T13:56"),
    _turn("D1:2", "assistant", "I adopted a beagle named Biscuit.", "Melanie", "2023-05-08T13:57"),
    _turn(
        "D1:3", "user", "I visited Paris with Melanie last week.", "Caroline", "2023-05-08T13:58"
    ),
    _turn("D1:4", "assistant", "My job is nurse at the clinic.", "Melanie", "2023-05-08T13:59"),
    _turn("D2:1", "user", "My favorite color is now green.", "Caroline", "2023-06-01T10:00"),
]
ALL_TURNS = {"D1:1", "D1:2", "D1:3", "D1:4", "D2:1"}
QUESTIONS = [
    "What is Caroline's favorite color?",
    "What dog did Melanie adopt?",
    "Where did Caroline travel with Melanie?",
]
#: The same questions, the dog asked for by its breed (A-Mem's and MemoryOS's tests).
BEAGLE_QUESTIONS = [QUESTIONS[0], "Which beagle did Melanie adopt?", QUESTIONS[2]]

#: Every product, as the protocol tests (MemoryBench, LoCoMo) configure it.
PRODUCTS = {
    "mem0_paper": {"type": "mem0_paper", "update_batch": 2, "top_k": 5},
    "mem0_graph": {"type": "mem0_graph", "update_batch": 2, "top_k": 5},
    "graphiti": {"type": "graphiti", "top_k": 5},
    "memoryos": {"type": "memoryos", "top_k": 5},
    "langmem": {"type": "langmem", "update_batch": 2, "top_k": 5},
    "a_mem": {"type": "a_mem", "top_k": 5},
}


async def ingest(spec: dict, gateway: Gateway, messages: list[Message] = CONVERSATION) -> Any:
    """A memory of ``spec`` that has added ``messages``."""
    memory = build(spec, llm=gateway)
    await memory.add(messages)
    return memory


def round_trip(spec: dict, folder: Path, k: int, questions: list[str] = QUESTIONS):
    """Ingest the conversation, answer, save into ``folder``, load into a fresh memory and
    answer again: ``(memory, loaded, before, after)``."""

    async def go():
        gateway = Gateway.from_config({})
        memory = await ingest(spec, gateway)
        before = [await memory.retrieve(q, k) for q in questions]
        memory.save(folder)
        loaded = build(spec, llm=gateway)
        loaded.load(folder)
        after = [await loaded.retrieve(q, k) for q in questions]
        return memory, loaded, before, after

    return asyncio.run(go())


def cached_rerun(spec: dict, folder: Path, k: int, questions: list[str] = QUESTIONS):
    """The same ingest and answers twice on one cache: the answers and ledgers (by role /
    task) of both runs, ``(first, counts, second, again)``."""

    async def once():
        gateway = Gateway.from_config({}, folder / "cache")
        memory = await ingest(spec, gateway)
        items = [await memory.retrieve(q, k) for q in questions]
        gateway.close()
        return items, gateway.ledger.to_dict()["by_role_task"]

    first, counts = asyncio.run(once())
    second, again = asyncio.run(once())
    return first, counts, second, again


def assert_all_from_the_cache(counts: dict, again: dict) -> None:
    """The rerun made every call of the first run, each a cache hit."""
    for key, entry in again.items():
        assert entry["calls"] == counts[key]["calls"] > 0
        assert entry["cache_hits"] == entry["calls"], key


def writer_tasks(ledger: dict) -> set[str]:
    return {key for key in ledger if key.startswith("memory_writer/")}


def two_episodes_at_once(spec: dict, questions: list[str] = QUESTIONS):
    """Two memories ingesting halves of the conversation side by side on one event loop:
    ``(one, two, turns found by one, turns found by two)``."""

    async def go():
        gateway = Gateway.from_config({})
        one, two = await asyncio.gather(
            ingest(spec, gateway, CONVERSATION[:2]), ingest(spec, gateway, CONVERSATION[2:4])
        )
        found = [
            {s for q in questions for i in await m.retrieve(q, 10) for s in i.source_ids}
            for m in (one, two)
        ]
        return one, two, *found

    return asyncio.run(go())


def endpoint(server: Any, cache: Path | None = None, **binding: Any) -> Gateway:
    """A gateway whose writer is the OpenAI-compatible test server."""
    models = {"memory_writer": {"base_url": server.base_url, "model": "m", **binding}}
    return Gateway.from_config(models, cache)


def through_endpoint(
    server: Any,
    spec: dict,
    messages: list[Message],
    query: str | None = None,
    k: int = 1,
    cache: Path | None = None,
    **binding: Any,
):
    """Ingest ``messages`` with the writer at the test server, then retrieve ``query`` (if
    any): ``(items, memory, ledger by role / task)``."""

    async def go():
        gateway = endpoint(server, cache, **binding)
        memory = await ingest(spec, gateway, messages)
        items = await memory.retrieve(query, k) if query is not None else None
        await gateway.aclose()
        gateway.close()
        return items, memory, gateway.ledger.to_dict()["by_role_task"]

    return asyncio.run(go())


def missing_install(monkeypatch: pytest.MonkeyPatch, module: str, spec: dict) -> str:
    """The error of building ``spec`` as if ``module`` were not installed: one line."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError) as error:
        build(spec, llm=Gateway.from_config({}))
    message = str(error.value)
    assert "\n" not in message
    return message


def amemgym_chain(users: Any, spec: dict, folder: Path):
    """The interactive protocol's step chain (a one-user AMemGym fixture), two steps: the steps'
    stats of user ben and his memory loaded from step 1's snapshot (which holds his turns
    only)."""
    results = run_chain(users, spec, folder, interactive_gateway(), steps=2)
    memory = build(spec, llm=interactive_gateway())
    memory.load(folder / "step1" / "ben")
    assert all(t.startswith("ben_p") for t in memory.stored_ids())  # ben's turns only
    return [r.manifest["stats"]["ben"] for r in results], memory


def run_synthetic_workflow(
    tmp_path: Path, system: str, spec: dict | None = None
) -> tuple[pd.Series, dict[str, dict]]:
    """A tiny workflow run of ``system`` on the synthetic benchmark (one user, three sessions):
    its micro scores and its ingest ledger (by role / task). ``spec`` replaces the default
    config's definition of the system."""
    wd = workdir(tmp_path)
    override = {
        "run": {"benchmarks": ["synthetic"], "systems": [system]},
        "benchmarks": {
            "synthetic": {
                "shards": 1,
                "params": {"users": 1, "periods": 1, "sessions_per_period": 3},
            }
        },
    }
    if spec is not None:
        override["systems"] = {system: spec}
    extra = Path(tmp_path / f"{system}.yaml")
    extra.write_text(yaml.safe_dump(override))
    snakemake(wd, configfiles=(TINY, extra))
    run = wd / f"results/synthetic/{system}/qa/step0"
    scores = pd.read_parquet(run / "scores.parquet")
    micro = scores[scores["aggregate"] == "micro"].set_index("metric")["value"]
    ledger = json.loads((run / "shard0/ingest.ledger.json").read_text())["by_role_task"]
    return micro, ledger
