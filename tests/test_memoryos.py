"""MemoryOS (``memoryos``: memoryos-pro 0.1.0) behind the MemorySystem API, every model call
through the gateway, offline.

``make test`` (install-test) installs memoryos-pro with ``--no-deps``, so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import memoryos as offline
from mnemoflow.memory.products import memoryos as adapter
from mnemoflow.testing.openai_server import OpenAITestServer
from tests import products_fixtures as pf
from tests.products_fixtures import users  # noqa: F401  (a fixture)

QUESTIONS = pf.BEAGLE_QUESTIONS
#: Small tiers, so five turns reach every tier: short-term (2 pairs), mid-term pages, and
#: long-term knowledge (a session's heat passes 1 with its first page).
SPEC = {"type": "memoryos", "short_term_capacity": 2, "mid_term_heat_threshold": 1.0}


def test_items_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    memory, _, before, after = pf.round_trip(SPEC, tmp_path, 4, QUESTIONS)
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
    assert memory.stored_ids() == pf.ALL_TURNS
    assert memory.stats()["pairs"] == 3 and memory.stats()["knowledge"] == 4
    assert (tmp_path / adapter.SNAPSHOT).stat().st_size > 0


def test_memoryos_clock_is_the_conversations(tmp_path):
    async def go():
        memory = await pf.ingest(SPEC, Gateway.from_config({}))
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
    first, counts, second, again = pf.cached_rerun(SPEC, tmp_path, 4, QUESTIONS)
    assert first == second
    assert pf.writer_tasks(again) == {
        f"memory_writer/memoryos_{t}"
        for t in ("continuity", "meta_info", "multi_summary", "keywords", "profile", "knowledge")
    }
    pf.assert_all_from_the_cache(counts, again)


def test_episodes_are_isolated_even_when_they_run_at_once():
    one, two, first, second = pf.two_episodes_at_once(SPEC, QUESTIONS)
    assert first == {"D1:1", "D1:2"} and second == {"D1:3", "D1:4"}
    assert one._folder.name != two._folder.name


def test_memoryos_prompts_reach_an_endpoint_as_memoryos_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible pf.endpoint, the bridge sends MemoryOS's own prompts."""
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

    spec = {**SPEC, "short_term_capacity": 1}
    with OpenAITestServer(reply=reply) as server:
        items, _, _ = pf.through_endpoint(
            server, spec, pf.CONVERSATION[:3], "beagle", 3, tmp_path / "cache"
        )
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
        memory = await pf.ingest(SPEC, Gateway.from_config({}), pf.CONVERSATION[:2])
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
            raise ValueError("the pf.endpoint is down")
        return await answer(self, request, spec)

    monkeypatch.setattr(OfflineBackend, "complete", failing)

    async def go():
        memory = await pf.ingest(SPEC, Gateway.from_config({}))
        with pytest.raises(ValueError, match="the pf.endpoint is down"):
            await memory.retrieve("Where?", 3)

    asyncio.run(go())


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    message = pf.missing_install(monkeypatch, "memoryos", {"type": "memoryos"})
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
    (_, stats), memory = pf.amemgym_chain(users, spec, tmp_path)
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0 and stats["pairs"] > 0
    assert memory.stored_ids()
