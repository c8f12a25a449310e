"""The papers' Mem0 (``mem0_paper``) and Mem0-G (``mem0_graph``): mem0ai 1.0.11 behind the
MemorySystem API, every model call through the gateway, offline.

The extra ``products`` is installed by ``make test`` (install-test), so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import mem0 as offline_mem0
from mnemoflow.memory.products import mem0_paper
from mnemoflow.testing.openai_server import OpenAITestServer
from tests import products_fixtures as pf
from tests.products_fixtures import users  # noqa: F401  (a fixture)

SYSTEMS = ["mem0_paper", "mem0_graph"]


def spec(name: str, **params) -> dict:
    return {"type": name, "speaker_roles": "all_user", "update_batch": 1, **params}


@pytest.mark.parametrize("name", SYSTEMS)
def test_save_load_answers_identically_and_items_name_their_turns(name, tmp_path):
    memory, _, before, after = pf.round_trip(spec(name), tmp_path, 3)
    assert before == after
    colour, dog, trip = before
    assert colour[0].text == "Caroline's favorite color is now green."
    assert colour[0].source_ids == ["D2:1", "D1:1"]  # the UPDATE keeps the earlier statement
    assert dog[0].text.startswith("Melanie adopted a beagle") and dog[0].source_ids == ["D1:2"]
    assert trip[0].source_ids == ["D1:3"] and 0 < trip[0].score <= 1
    assert memory.stored_ids() == pf.ALL_TURNS
    assert memory.stats()["events_update"] == 1
    assert (tmp_path / mem0_paper.SNAPSHOT).stat().st_size > 0
    if name == "mem0_graph":
        relations = [item.text for item in trip if item.id.startswith("relation")]
        assert any(r.startswith("caroline -- visited -- ") for r in relations), relations
        assert all(not i.source_ids for i in trip if i.id.startswith("relation"))


@pytest.mark.parametrize("name", SYSTEMS)
def test_a_rerun_is_served_from_the_cache(name, tmp_path):
    first, counts, second, again = pf.cached_rerun(spec(name), tmp_path, 3)
    assert first == second
    tasks = pf.writer_tasks(again)
    expected = {"memory_writer/mem0_extract_facts", "memory_writer/mem0_update_memory"}
    if name == "mem0_graph":
        expected |= {
            f"memory_writer/mem0_graph_{t}" for t in ("entities", "relations", "deletions")
        }
    assert tasks == expected
    pf.assert_all_from_the_cache(counts, again)  # texts embedded too


def test_episodes_are_isolated(tmp_path):
    async def go():
        gateway = Gateway.from_config({})
        one = await pf.ingest(spec("mem0_paper"), gateway, pf.CONVERSATION[:2])
        two = await pf.ingest(spec("mem0_paper"), gateway, pf.CONVERSATION[2:4])
        return (
            [i for q in pf.QUESTIONS for i in await one.retrieve(q, 10)],
            [i for q in pf.QUESTIONS for i in await two.retrieve(q, 10)],
            one,
            two,
        )

    first, second, one, two = asyncio.run(go())
    assert {s for i in first for s in i.source_ids} == {"D1:1", "D1:2"}
    assert {s for i in second for s in i.source_ids} == {"D1:3", "D1:4"}
    assert one._folder.name != two._folder.name


def test_episodes_run_at_once_with_an_embedder_that_needs_the_default_executor(monkeypatch):
    """A local embedding model embeds in the loop's default executor (asyncio.to_thread);
    mem0 blocks its own thread while the gateway answers, so it must not take those threads:
    more episodes at once than the executor has threads would otherwise wait for ever."""
    from concurrent.futures import ThreadPoolExecutor

    from mnemoflow.llm.offline import OfflineBackend, hashed_embedding

    async def embed_in_a_thread(self, texts, spec):
        return await asyncio.to_thread(lambda: np.stack([hashed_embedding(t) for t in texts]))

    monkeypatch.setattr(OfflineBackend, "embed", embed_in_a_thread)

    async def go():
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
        gateway = Gateway.from_config({})
        batches = [pf.CONVERSATION[i : i + 1] for i in range(4)]
        memories = await asyncio.wait_for(
            asyncio.gather(*(pf.ingest(spec("mem0_paper"), gateway, b) for b in batches)),
            timeout=60,
        )
        return [m.stored_ids() for m in memories]

    assert asyncio.run(go()) == [{"D1:1"}, {"D1:2"}, {"D1:3"}, {"D1:4"}]


def test_mem0_prompt_reaches_an_endpoint_dated_as_the_conversation(tmp_path):
    """Bound to an OpenAI-compatible pf.endpoint, the bridge sends mem0's own prompts, with its
    date line pinned to the conversation's day (not today's) and its response_format."""
    seen = []

    def reply(body):
        seen.append(body)
        system = body["messages"][0]["content"]
        if body["messages"][0]["role"] == "system" and "Personal Information Organizer" in system:
            return json.dumps({"facts": ["Favourite colour is teal"]})
        return json.dumps(
            {"memory": [{"id": "0", "text": "Favourite colour is teal", "event": "ADD"}]}
        )

    with OpenAITestServer(reply=reply) as server:
        items, _, _ = pf.through_endpoint(
            server, spec("mem0_paper"), pf.CONVERSATION[:1], "favourite colour", 1, tmp_path
        )
    assert [(i.text, i.source_ids) for i in items] == [("Favourite colour is teal", ["D1:1"])]
    extraction = seen[0]["messages"][0]["content"]
    assert "Today's date is 2023-05-08." in extraction
    assert seen[0]["response_format"] == {"type": "json_object"}
    assert "Caroline: My favorite color is teal." in seen[0]["messages"][1]["content"]


def test_mem0_graph_tool_calls_through_an_endpoint(tmp_path):
    """Mem0-G's graph steps are tool calls: the pf.endpoint is offered mem0's own tools and its
    function calls build the Kuzu graph that search returns; a rerun reaches it not once."""
    seen = []

    def reply(body):
        seen.append(body)
        tools = [t["function"]["name"] for t in body.get("tools") or ()]
        if "extract_entities" in tools:
            entities = [{"entity": "Caroline", "entity_type": "person"}]
            if "Paris" in body["messages"][-1]["content"]:
                entities.append({"entity": "Paris", "entity_type": "city"})
            return {
                "tool_calls": [{"name": "extract_entities", "arguments": {"entities": entities}}]
            }
        if "establish_relationships" in tools:
            relation = {"source": "Caroline", "relationship": "visited", "destination": "Paris"}
            call = {"name": "establish_relationships", "arguments": {"entities": [relation]}}
            return {"tool_calls": [call]}
        if "delete_graph_memory" in tools:
            return "Nothing to delete."
        if "Personal Information Organizer" in body["messages"][0]["content"]:
            return json.dumps({"facts": ["Visited Paris"]})
        return json.dumps({"memory": [{"id": "0", "text": "Visited Paris", "event": "ADD"}]})

    def go(server):
        question = "Where did Caroline go?"
        cache = tmp_path / "cache"
        return pf.through_endpoint(
            server, spec("mem0_graph"), pf.CONVERSATION[2:3], question, 2, cache
        )[0]

    with OpenAITestServer(reply=reply) as server:
        items = go(server)
        calls = len(seen)
        assert go(server) == items and len(seen) == calls  # all from the cache
    assert [(i.text, i.source_ids) for i in items] == [
        ("Visited Paris", ["D1:3"]),
        ("caroline -- visited -- paris", []),
    ]
    offered = {t["function"]["name"] for body in seen for t in body.get("tools") or ()}
    assert offered == {"extract_entities", "establish_relationships", "delete_graph_memory"}


def test_the_prompt_date_is_the_conversations_never_the_wall_clock():
    assert mem0_paper.conversation_date("2023-05-08T13:56") == "2023-05-08"
    assert mem0_paper.conversation_date("8 May, 2023") == "8 May, 2023"
    assert mem0_paper.conversation_date("") == "unknown"


def test_a_missing_extra_is_one_line_naming_the_install(monkeypatch):
    message = pf.missing_install(monkeypatch, "mem0", {"type": "mem0_paper"})
    assert "systems type mem0_paper: needs mem0ai==1.0.11" in message
    assert "pip install -e '.[products]'" in message and "make install-products" in message


def test_offline_update_decisions_are_in_mem0s_format():
    reply = json.loads(
        offline_mem0.update_memory(
            {
                "memories": [
                    {"id": "0", "text": "Caroline's favorite color is teal"},
                    {"id": "1", "text": "Caroline visited Paris"},
                    {"id": "2", "text": "Caroline's job is teacher"},
                ],
                "facts": ["Caroline's favorite color is green", "Caroline has a dog named Rex"],
            }
        )
    )["memory"]
    by_event = {e["event"]: e for e in reply}
    assert by_event["UPDATE"] == {
        "id": "0",
        "text": "Caroline's favorite color is green",
        "event": "UPDATE",
        "old_memory": "Caroline's favorite color is teal",
    }
    assert (
        by_event["ADD"]["text"] == "Caroline has a dog named Rex" and by_event["ADD"]["id"] == "3"
    )
    assert {e["id"] for e in reply if e["event"] == "NONE"} == {"1", "2"}  # listed unchanged
    assert all(e["text"] for e in reply)  # mem0 skips an event without text


def test_offline_facts_come_from_the_users_messages_only():
    records = [
        {"n": 1, "speaker": "Ann", "role": "user", "time": "", "content": "My cat is Tom."},
        {"n": 2, "speaker": "Bot", "role": "assistant", "time": "", "content": "My name is Bot."},
    ]
    assert json.loads(offline_mem0.extract_facts({"messages": records})) == {
        "facts": ["Ann's cat is Tom."]
    }


def test_offline_graph_heuristics_name_entities_relations_and_contradictions():
    said = ["I moved to Lisbon with Bob.", "My favorite color is red."]
    batch = [
        {"n": n, "speaker": "Ann", "role": "user", "time": "", "content": text}
        for n, text in enumerate(said, start=1)
    ]
    fields = {"text": "", "messages": batch, "self": "episode"}
    names = [name for name, _ in offline_mem0.graph_entities(fields)]
    assert names == ["ann", "lisbon", "bob", "red"]
    relations = offline_mem0.graph_relations({**fields, "entities": names})
    assert {"source": "ann", "relationship": "moved", "destination": "lisbon"} in relations
    assert {"source": "ann", "relationship": "favorite_color", "destination": "red"} in relations
    existing = [
        {"source": "ann", "relationship": "favorite_color", "destination": "blue"},
        {"source": "ann", "relationship": "likes", "destination": "tea"},
    ]
    calls = offline_mem0.deletions({**fields, "existing": existing})
    assert [c["arguments"]["destination"] for c in calls] == ["blue"]
    query = {"text": "Where did Ann move?", "messages": [], "self": "episode"}
    assert [n for n, _ in offline_mem0.graph_entities(query)] == ["ann"]


def test_mem0_paper_on_the_amemgym_chain(users, tmp_path):  # noqa: F811  (the fixture)
    """The interactive protocol's step chain (a one-user AMemGym fixture): the assistant's
    pairs reach mem0, each step's snapshot loads, and its memories name the turns they came from."""
    (_, stats), memory = pf.amemgym_chain(users, {"type": "mem0_paper", "top_k": 5}, tmp_path)
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0 and stats["items"] > 0
    assert memory.stored_ids()
