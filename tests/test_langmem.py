"""LangMem (``langmem``: langmem 0.0.30 on LangGraph's InMemoryStore) behind the MemorySystem API,
every model call through the gateway, offline.

The extra ``products`` (which holds langmem) is installed by ``make test`` (install-test), so
these tests never skip.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from datetime import UTC, datetime

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import HANDLERS, OfflineBackendError, ToolCalls
from mnemoflow.llm.offline import langmem as offline
from mnemoflow.memory.base import build
from mnemoflow.memory.products import langmem as adapter
from mnemoflow.testing.openai_server import OpenAITestServer
from tests import products_fixtures as pf
from tests.products_fixtures import users  # noqa: F401  (a fixture)

SPEC = {"type": "langmem"}


def test_items_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    memory, loaded, before, after = pf.round_trip(SPEC, tmp_path, 4)
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
    assert memory.stored_ids() == loaded.stored_ids() == pf.ALL_TURNS
    assert memory.stats() == {
        "items": 4,
        "tokens_written": 38,
        "writer_calls": 3,
        "parse_failures": 0,
    }
    assert loaded.stats() == memory.stats()


def test_ids_are_counters_and_the_stores_clock_is_the_conversations(tmp_path):
    async def go():
        memory = await pf.ingest(SPEC, Gateway.from_config({}))
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
    first, counts, second, again = pf.cached_rerun(SPEC, tmp_path, 4)
    assert first == second
    assert pf.writer_tasks(again) == {"memory_writer/langmem_manage_memories"}
    pf.assert_all_from_the_cache(counts, again)
    # one call per manager step (the writer never answers blank, so the gateway never re-asks)
    assert counts["memory_writer/langmem_manage_memories"]["calls"] == 3
    assert counts["memory_writer/langmem_manage_memories"]["reasks"] == 0


def test_episodes_are_isolated_even_when_they_run_at_once():
    one, two, first, second = pf.two_episodes_at_once(SPEC)
    assert first == {"D1:1", "D1:2"} and second == {"D1:3", "D1:4"}
    assert one._store is not two._store
    assert one.counter == two.counter  # each memory counts its own ids


def test_langmem_prompts_and_tools_reach_an_endpoint_as_langmem_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible pf.endpoint, the bridge sends LangMem's own prompt and tools,
    and the pf.endpoint's tool calls become memories."""
    seen = []

    def reply(body):
        seen.append(body)
        content = "Caroline likes teal." if len(seen) == 1 else "Caroline visited Paris."
        return {"content": "", "tool_calls": [{"name": "Memory", "arguments": {
            "content": content}}]}  # fmt: skip

    with OpenAITestServer(reply=reply) as server:
        items, _, _ = pf.through_endpoint(server, SPEC, pf.CONVERSATION[:3], "teal", 3, tmp_path)
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

    with OpenAITestServer(reply=reply) as server:
        items, _, ledger = pf.through_endpoint(server, SPEC, pf.CONVERSATION[:2], "teal", 3)
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
        asyncio.run(pf.ingest(SPEC, Gateway.from_config({}), pf.CONVERSATION[:2]))


def test_a_model_call_from_an_unknown_site_is_an_error():
    memory = build(SPEC, llm=Gateway.from_config({}))
    with pytest.raises(RuntimeError, match="call site the mnemoflow bridge does not know"):
        memory.take_call()


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    message = pf.missing_install(monkeypatch, "langmem", SPEC)
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
    (_, stats), memory = pf.amemgym_chain(users, {"type": "langmem", "top_k": 5}, tmp_path)
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0 and stats["items"] > 0
    assert memory.stored_ids()
