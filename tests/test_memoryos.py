"""MemoryOS (``memoryos``: memoryos-pro 0.1.0) behind the MemorySystem API, every model call
through the gateway, offline.

``make test`` (install-test) installs memoryos-pro with ``--no-deps``, so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import memoryos as offline
from mnemoflow.memory.base import Message, build
from mnemoflow.memory.products import memoryos as adapter
from mnemoflow.testing.openai_server import OpenAITestServer
from tests.test_interactive import gateway as interactive_gateway
from tests.test_interactive import run_chain, users  # noqa: F401  (a fixture)
from tests.test_memory_products import run_synthetic_workflow


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
QUESTIONS = [
    "What is Caroline's favorite color?",
    "Which beagle did Melanie adopt?",
    "Where did Caroline travel with Melanie?",
]
#: Small tiers, so five turns reach every tier: short-term (2 pairs), mid-term pages, and
#: long-term knowledge (a session's heat passes 1 with its first page).
SPEC = {"type": "memoryos", "short_term_capacity": 2, "mid_term_heat_threshold": 1.0}


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
        return memory, before, after

    memory, before, after = asyncio.run(go())
    assert before == after
    colour, dog, trip = before
    # long-term knowledge, extracted from the first page's pair, names that pair's turns
    assert colour[0].text == "- Caroline's favorite color is teal."
    assert colour[0].source_ids == ["D1:1", "D1:2"] and 0 < colour[0].score <= 1
    # the latest pair is still in short-term memory; it is ranked like the pages
    assert ("Caroline: My favorite color is now green.\n(no reply)", ["D2:1"]) in [
        (i.text, i.source_ids) for i in colour
    ]
    assert dog[0].text == "- Melanie adopted a beagle named Biscuit."  # assistant knowledge
    pages = [i for i in trip if i.id.startswith("page_")]
    assert pages[0].source_ids == ["D1:3", "D1:4"] and pages[0].time == "2023-05-08T13:59"
    assert all(a.score >= b.score for a, b in zip(trip, trip[1:], strict=False))
    assert memory.stored_ids() == {"D1:1", "D1:2", "D1:3", "D1:4", "D2:1"}
    assert memory.stats()["pairs"] == 3 and memory.stats()["knowledge"] == 4
    assert (tmp_path / adapter.SNAPSHOT).stat().st_size > 0


def test_memoryos_clock_is_the_conversations(tmp_path):
    async def go():
        memory = await ingest(Gateway.from_config({}))
        memory.save(tmp_path)
        return memory

    asyncio.run(go())
    import tarfile

    with tarfile.open(tmp_path / adapter.SNAPSHOT) as archive:
        files = {m.name: archive.extractfile(m) for m in archive.getmembers() if m.isfile()}
        short = json.load(files["users/episode/short_term.json"])
        mid = json.load(files["users/episode/mid_term.json"])
    assert [qa["timestamp"] for qa in short] == ["2023-06-01 10:00:00"]
    session = next(iter(mid["sessions"].values()))
    assert session["id"] == "session_000002"  # ids are counters, not uuids
    times = {session["timestamp"], session["last_visit_time"]}
    times |= {p["timestamp"] for s in mid["sessions"].values() for p in s["details"]}
    assert times <= {"2023-05-08 13:57:00", "2023-05-08 13:59:00", "2023-06-01 10:00:00"}


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
    tasks = {key for key in again if key.startswith("memory_writer/")}
    assert tasks == {
        f"memory_writer/memoryos_{t}"
        for t in ("continuity", "meta_info", "multi_summary", "keywords", "profile", "knowledge")
    }
    for key, entry in again.items():
        assert entry["calls"] == counts[key]["calls"] > 0
        assert entry["cache_hits"] == entry["calls"], key


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
    assert one._folder.name != two._folder.name


def test_memoryos_prompts_reach_an_endpoint_as_memoryos_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible endpoint, the bridge sends MemoryOS's own prompts."""
    seen = []

    def reply(body):
        seen.append(body)
        system = body["messages"][0]["content"]
        if "continuity detector" in system:
            return "false"
        if "analyzing dialogue topics" in system:
            return json.dumps([{"theme": "pets", "keywords": ["beagle"], "content": "A beagle"}])
        if "keyword extraction" in system:
            return "beagle, Biscuit"
        if "knowledge extraction" in system:
            return "【User Private Data】\n- Has a beagle\n【Assistant Knowledge】\nNone"
        return "None"

    async def go(server):
        models = {"memory_writer": {"base_url": server.base_url, "model": "m"}}
        gateway = Gateway.from_config(models, tmp_path / "cache")
        memory = await ingest(gateway, CONVERSATION[:3], short_term_capacity=1)
        items = await memory.retrieve("beagle", 3)
        await gateway.aclose()
        return items

    with OpenAITestServer(reply=reply) as server:
        items = asyncio.run(go(server))
    # both analyses extracted the line: one item, naming the turns of both
    knowledge = [(i.text, i.source_ids) for i in items if i.id.startswith("user_knowledge")]
    assert knowledge == [("- Has a beagle", ["D1:1", "D1:2", "D1:3"])]
    continuity = next(b for b in seen if "continuity" in b["messages"][0]["content"])
    assert "User: Caroline: My favorite color is teal." in continuity["messages"][1]["content"]
    assert "Assistant: Melanie: I adopted a beagle" in continuity["messages"][1]["content"]


def test_a_model_call_from_an_unknown_site_is_an_error_and_nothing_is_downloaded():
    """MemoryOS's own answer (get_response) calls the model from a site the bridge does not
    know: refused, never guessed; its embedder is the gateway's, never a hub download."""
    import memoryos.utils

    async def go():
        memory = await ingest(Gateway.from_config({}), CONVERSATION[:2])
        with pytest.raises(RuntimeError, match="call site the mnemoflow bridge does not know"):
            await memory._in_thread(memory._memory.get_response, "What colour?")

    asyncio.run(go())
    assert isinstance(memoryos.utils._model_cache[adapter.EMBEDDER], adapter._Embedder)


def test_a_failed_call_is_never_swallowed_by_memoryos(monkeypatch):
    """MemoryOS's retriever catches every error and returns nothing; the adapter re-raises."""
    from mnemoflow.llm.offline import OfflineBackend

    answer = OfflineBackend.complete

    async def failing(self, request, spec):
        if request.task == "memoryos_keywords" and request.fields["texts"] == ["Where?"]:
            raise ValueError("the endpoint is down")
        return await answer(self, request, spec)

    monkeypatch.setattr(OfflineBackend, "complete", failing)

    async def go():
        memory = await ingest(Gateway.from_config({}))
        with pytest.raises(ValueError, match="the endpoint is down"):
            await memory.retrieve("Where?", 3)

    asyncio.run(go())


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "memoryos", None)  # as if memoryos-pro were not installed
    with pytest.raises(ConfigError) as error:
        build({"type": "memoryos"}, llm=Gateway.from_config({}))
    message = str(error.value)
    assert "\n" not in message
    assert "systems type memoryos: needs memoryos-pro==0.1.0" in message
    assert "pip install --no-deps memoryos-pro==0.1.0" in message


def _pair(user: str, said: str, assistant: str, replied: str) -> dict:
    return {
        "user": {"speaker": user, "content": said},
        "assistant": {"speaker": assistant, "content": replied},
        "time": "",
    }


def test_offline_knowledge_is_first_person_facts_in_memoryos_sections():
    pages = [_pair("Ann", "My cat is Tom. Nice day?", "Bot", "My job is keeper at the zoo.")]
    assert offline.knowledge({"pages": pages}).split("\n") == [
        "【User Private Data】",
        "- Ann's cat is Tom.",
        "【Assistant Knowledge】",
        "- Bot's job is keeper at the zoo.",
    ]
    none = offline.knowledge({"pages": [_pair("Ann", "Nice day?", "", "")]})
    assert none == "【User Private Data】\nNone\n【Assistant Knowledge】\nNone"


def test_offline_profile_is_not_made_up_and_continuity_needs_shared_words():
    assert offline.profile({"pages": [], "profile": "No existing profile data."}) == "None"
    assert offline.profile({"pages": [], "profile": "Openness (High)"}) == "Openness (High)"
    previous = _pair("Ann", "We hiked the Alps trail.", "Bob", "The Alps are great.")
    assert offline.continuity({"previous": None, "current": previous}) == "false"
    same = _pair("Ann", "The Alps trail was steep.", "Bob", "Yes.")
    other = _pair("Ann", "My cat is sick.", "Bob", "Sorry.")
    assert offline.continuity({"previous": previous, "current": same}) == "true"
    assert offline.continuity({"previous": previous, "current": other}) == "false"
    texts = ["the cat sat; the cat ran", "a dog"]
    assert offline.keywords({"texts": texts}) == "cat, sat, ran, dog"


def test_memoryos_on_the_amemgym_chain(users, tmp_path):  # noqa: F811  (the fixture)
    """The interactive step chain: the assistant's pairs reach MemoryOS, each step's snapshot
    loads, and its pages name the turns they came from."""
    spec = {"type": "memoryos", "top_k": 5, "short_term_capacity": 2}
    results = run_chain(users, spec, tmp_path, interactive_gateway(), steps=2)
    stats = results[1].manifest["stats"]["ben"]
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0 and stats["pairs"] > 0
    memory = build(spec, llm=interactive_gateway())
    memory.load(tmp_path / "step1" / "ben")
    assert memory.stored_ids() and all(t.startswith("ben_p") for t in memory.stored_ids())


@pytest.mark.slow
def test_a_workflow_runs_memoryos_on_the_synthetic_benchmark(tmp_path):
    # a short-term memory of 2 pairs, so that the tiny episode reaches mid-term memory
    spec = {"type": "memoryos", "top_k": 5, "short_term_capacity": 2}
    micro, ledger = run_synthetic_workflow(tmp_path, "memoryos", spec)
    assert micro["turn_evidence_recall"] > 0.5 and micro["accuracy"] > 0.5, micro
    assert ledger["memory_writer/memoryos_continuity"]["calls"] > 0
    assert ledger["memory_writer/memoryos_multi_summary"]["calls"] > 0
