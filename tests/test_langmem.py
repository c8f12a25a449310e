"""LangMem (``langmem``: langmem 0.0.30 on LangGraph's InMemoryStore) behind the MemorySystem API,
every model call through the gateway, offline.

The extra ``products`` (which holds langmem) is installed by ``make test`` (install-test), so
these tests never skip.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from datetime import UTC, datetime

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import HANDLERS, OfflineBackendError, ToolCalls
from mnemoflow.llm.offline import langmem as offline
from mnemoflow.memory.base import build
from mnemoflow.memory.products import langmem as adapter
from mnemoflow.testing.openai_server import OpenAITestServer
from tests.test_interactive import gateway as interactive_gateway
from tests.test_interactive import run_chain, users  # noqa: F401  (a fixture)
from tests.test_memory_products import CONVERSATION, QUESTIONS, run_synthetic_workflow

SPEC = {"type": "langmem"}
ALL_TURNS = {"D1:1", "D1:2", "D1:3", "D1:4", "D2:1"}


async def ingest(gateway: Gateway, messages=CONVERSATION, **params):
    memory = build({**SPEC, **params}, llm=gateway)
    await memory.add(messages)
    return memory


def test_items_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    async def go():
        gateway = Gateway.from_config({})
        memory = await ingest(gateway)
        before = [await memory.retrieve(q, 4) for q in QUESTIONS]
        memory.save(tmp_path)
        loaded = build(SPEC, llm=gateway)
        loaded.load(tmp_path)
        after = [await loaded.retrieve(q, 4) for q in QUESTIONS]
        return memory, loaded, before, after

    memory, loaded, before, after = asyncio.run(go())
    assert before == after
    colour, dog, trip = before
    # D2:1 patched the teal memory (trustcall's PatchDoc): it keeps the turns of both statements
    assert (colour[0].text, colour[0].source_ids) == (
        "Caroline's favorite color is now green.",
        ["D1:1", "D1:2", "D2:1"],
    )
    assert colour[0].time == "2023-06-01T10:00" and 0 < colour[0].score <= 1
    assert (dog[0].text, dog[0].source_ids) == (
        "Melanie adopted a beagle named Biscuit.",
        ["D1:1", "D1:2"],
    )
    assert (trip[0].text, trip[0].source_ids) == (
        "Caroline visited Paris with Melanie last week.",
        ["D1:3", "D1:4"],
    )
    assert all(a.score >= b.score for a, b in zip(trip, trip[1:], strict=False))
    assert memory.stored_ids() == loaded.stored_ids() == ALL_TURNS
    assert memory.stats() == {
        "items": 4,
        "tokens_written": 38,
        "writer_calls": 3,
        "parse_failures": 0,
    }
    assert loaded.stats() == memory.stats()


def test_ids_are_counters_and_the_stores_clock_is_the_conversations(tmp_path):
    async def go():
        memory = await ingest(Gateway.from_config({}))
        memory.save(tmp_path)

    asyncio.run(go())
    with gzip.open(tmp_path / adapter.SNAPSHOT, "rt") as snapshot:
        items = json.load(snapshot)["items"]
    assert [i["key"] for i in items][:1] == ["00000000-0000-0000-0000-000000000002"]
    stamps = {i["created_at"] for i in items} | {i["updated_at"] for i in items}
    assert stamps == {"2023-05-08T13:57:00+00:00", "2023-05-08T13:59:00+00:00",
                      "2023-06-01T10:00:00+00:00"}  # fmt: skip
    assert all(len(i["vectors"]["content.content"]) == 256 for i in items)
    assert adapter.conversation_clock("2023-05-08T13:56") == datetime(
        2023, 5, 8, 13, 56, tzinfo=UTC
    )
    assert adapter.conversation_clock("8 May 2023") is None


def test_a_rerun_is_served_from_the_cache(tmp_path):
    async def once():
        gateway = Gateway.from_config({}, tmp_path / "cache")
        memory = await ingest(gateway)
        items = [await memory.retrieve(q, 4) for q in QUESTIONS]
        gateway.close()
        return items, gateway.ledger.to_dict()["by_role_task"]

    first, counts = asyncio.run(once())
    second, again = asyncio.run(once())
    assert first == second
    assert {k for k in again if k.startswith("memory_writer/")} == {
        "memory_writer/langmem_manage_memories"
    }
    for key, entry in again.items():
        assert entry["calls"] == counts[key]["calls"] > 0
        assert entry["cache_hits"] == entry["calls"], key
    # one call per manager step (the writer never answers blank, so the gateway never re-asks)
    assert counts["memory_writer/langmem_manage_memories"]["calls"] == 3
    assert counts["memory_writer/langmem_manage_memories"]["reasks"] == 0


def test_episodes_are_isolated_even_when_they_run_at_once():
    async def go():
        gateway = Gateway.from_config({})
        one, two = await asyncio.gather(
            ingest(gateway, CONVERSATION[:2]), ingest(gateway, CONVERSATION[2:4])
        )
        found = [
            {s for q in QUESTIONS for i in await m.retrieve(q, 10) for s in i.source_ids}
            for m in (one, two)
        ]
        return one, two, found

    one, two, (first, second) = asyncio.run(go())
    assert first == {"D1:1", "D1:2"} and second == {"D1:3", "D1:4"}
    assert one._store is not two._store
    assert one.counter == two.counter  # each memory counts its own ids


def test_langmem_prompts_and_tools_reach_an_endpoint_as_langmem_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible endpoint, the bridge sends LangMem's own prompt and tools,
    and the endpoint's tool calls become memories."""
    seen = []

    def reply(body):
        seen.append(body)
        content = "Caroline likes teal." if len(seen) == 1 else "Caroline visited Paris."
        return {"content": "", "tool_calls": [{"name": "Memory", "arguments": {
            "content": content}}]}  # fmt: skip

    async def go(server):
        models = {"memory_writer": {"base_url": server.base_url, "model": "m"}}
        gateway = Gateway.from_config(models, tmp_path / "cache")
        memory = await ingest(gateway, CONVERSATION[:3])
        items = await memory.retrieve("teal", 3)
        await gateway.aclose()
        return items

    with OpenAITestServer(reply=reply) as server:
        items = asyncio.run(go(server))
    assert [(i.text, i.source_ids) for i in items] == [
        ("Caroline likes teal.", ["D1:1", "D1:2"]),
        ("Caroline visited Paris.", ["D1:3"]),
    ]
    first, second = seen
    # nothing stored yet: trustcall's plain extraction, the model's choice of tools
    assert [t["function"]["name"] for t in first["tools"]] == ["Memory"]
    assert "tool_choice" not in first
    prompt = first["messages"][-1]["content"]
    assert "<session_00000000-0000-0000-0000-000000000001>" in prompt  # a counter, not uuid4
    assert "Name: Caroline\n\n[2023-05-08T13:56] My favorite color is teal." in prompt
    # then the stored memory is shown by its id, and it may be patched; a tool call is required
    assert [t["function"]["name"] for t in second["tools"]] == ["PatchDoc", "Memory"]
    assert second["tool_choice"] == "required"  # LangChain's "any"
    assert "Caroline likes teal." in second["messages"][0]["content"]


def test_an_invalid_tool_call_is_repaired_through_the_endpoint(tmp_path):
    """trustcall's re-ask after a tool call that fails validation goes through the gateway too,
    tagged as a repair of the step, and its patch becomes the memory."""
    seen = []

    def reply(body):
        seen.append(body)
        if len(seen) == 1:  # Memory without its required "content"
            return {"content": "", "tool_calls": [{"name": "Memory", "arguments": {
                "text": "Caroline likes teal."}}]}  # fmt: skip
        fix = {"op": "add", "path": "/content", "value": "Caroline likes teal."}
        patch = {"json_doc_id": "call_0", "planned_edits": "add content", "patches": [fix]}
        return {"content": "", "tool_calls": [{"name": "PatchFunctionErrors", "arguments": patch}]}

    async def go(server):
        gateway = Gateway.from_config(
            {"memory_writer": {"base_url": server.base_url, "model": "m"}}
        )
        memory = await ingest(gateway, CONVERSATION[:2])
        items = await memory.retrieve("teal", 3)
        await gateway.aclose()
        return items, gateway.ledger.to_dict()["by_role_task"]

    with OpenAITestServer(reply=reply) as server:
        items, ledger = asyncio.run(go(server))
    assert [(i.text, i.source_ids) for i in items] == [("Caroline likes teal.", ["D1:1", "D1:2"])]
    assert ledger["memory_writer/langmem_manage_memories"]["calls"] == 1
    assert ledger["memory_writer/langmem_repair_tool_call"]["calls"] == 1
    assert "1 validation error for Memory" in seen[1]["messages"][-1]["content"]


def test_a_failed_repair_call_is_never_swallowed_by_trustcall(monkeypatch):
    """trustcall's repair step catches every error of its model call; the adapter re-raises it
    (here: the offline backend, which never needs a repair, has no handler for one)."""
    monkeypatch.setitem(
        HANDLERS, adapter.MANAGE, lambda fields: ToolCalls([{"name": "Memory", "arguments": {}}])
    )
    with pytest.raises(OfflineBackendError, match="no handler for task 'langmem_repair_tool_call'"):
        asyncio.run(ingest(Gateway.from_config({}), CONVERSATION[:2]))


def test_a_model_call_from_an_unknown_site_is_an_error():
    memory = build(SPEC, llm=Gateway.from_config({}))
    with pytest.raises(RuntimeError, match="call site the mnemoflow bridge does not know"):
        memory.take_call()


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "langmem", None)  # as if langmem were not installed
    with pytest.raises(ConfigError) as error:
        build(SPEC, llm=Gateway.from_config({}))
    message = str(error.value)
    assert "\n" not in message
    assert "systems type langmem: needs langmem==0.0.30" in message
    assert "pip install -e '.[products]'" in message


def test_offline_manager_inserts_patches_and_deletes_only_when_offered():
    def said(speaker: str, content: str) -> dict:
        return {"n": 1, "speaker": speaker, "role": "user", "time": "", "content": content}

    shown = [{"id": "a1", "text": "Ann's cat is Tom."}, {"id": "b2", "text": "Ann's job is chef."}]
    fields = {
        "messages": [said("Ann", "My cat is Max. My car is red. I don't have a job.")],
        "memories": shown,
        "tools": ["PatchDoc", "Memory"],
    }
    assert offline.manage_memories(fields) == [
        {"name": "PatchDoc", "arguments": {
            "json_doc_id": "a1",
            "planned_edits": "replace /content: \"Ann's cat is Tom.\" -> \"Ann's cat is Max.\"",
            "patches": [{"op": "replace", "path": "/content", "value": "Ann's cat is Max."}]}},
        {"name": "Memory", "arguments": {"content": "Ann's car is red."}},
    ]  # fmt: skip
    deletes = offline.manage_memories({**fields, "tools": ["PatchDoc", "Memory", "RemoveDoc"]})
    assert {"name": "RemoveDoc", "arguments": {"json_doc_id": "b2"}} in deletes
    # nothing to write: text when no call is required, a PatchDoc of no patches when one is
    idle = {**fields, "messages": [said("Ann", "Hi there!")]}
    assert offline.manage_memories({**idle, "memories": [], "tools": ["Memory"]}) == (
        "Nothing new to remember."
    )
    assert offline.manage_memories(idle) == [
        {"name": "PatchDoc", "arguments": {
            "json_doc_id": "a1", "planned_edits": "nothing new: no change", "patches": []}}
    ]  # fmt: skip


def test_langmem_on_the_amemgym_chain(users, tmp_path):  # noqa: F811  (the fixture)
    """The interactive step chain: the assistant's pairs reach LangMem, each step's snapshot
    loads, and its memories name the turns they came from."""
    spec = {"type": "langmem", "top_k": 5}
    results = run_chain(users, spec, tmp_path, interactive_gateway(), steps=2)
    stats = results[1].manifest["stats"]["ben"]
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0 and stats["items"] > 0
    memory = build(spec, llm=interactive_gateway())
    memory.load(tmp_path / "step1" / "ben")
    assert memory.stored_ids() and all(t.startswith("ben_p") for t in memory.stored_ids())


@pytest.mark.slow
def test_a_workflow_runs_langmem_on_the_synthetic_benchmark(tmp_path):
    micro, ledger = run_synthetic_workflow(tmp_path, "langmem")
    assert micro["turn_evidence_recall"] > 0.5 and micro["accuracy"] > 0.5, micro
    assert ledger["memory_writer/langmem_manage_memories"]["calls"] > 0
