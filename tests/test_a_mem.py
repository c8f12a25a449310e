"""A-Mem (``a_mem``: a-mem 0.2.6) behind the MemorySystem API, every model call through the
gateway, offline.

``make test`` (install-test) installs the extra ``products-amem``, so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import a_mem as offline
from mnemoflow.memory.products import a_mem as adapter
from mnemoflow.testing.openai_server import OpenAITestServer
from tests import products_fixtures as pf
from tests.products_fixtures import users  # noqa: F401  (a fixture)

QUESTIONS = pf.BEAGLE_QUESTIONS
SPEC = {"type": "a_mem", "top_k": 3}


def test_items_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    memory, loaded, before, after = pf.round_trip(SPEC, tmp_path, 3, QUESTIONS)
    assert before == after
    colour, dog, trip = before
    # one note per message, naming its turn; the similarity is a cosine, highest first
    assert [(i.id, i.source_ids) for i in colour[:2]] == [
        ("note_000001", ["D1:1"]),
        ("note_000005", ["D2:1"]),
    ]
    assert colour[0].text == (
        "Caroline: My favorite color is teal.\ncontext: Caroline on favorite, color, teal."
    )
    assert colour[0].time == "2023-05-08T13:56" and 0 < colour[0].score <= 1
    assert dog[0].source_ids == ["D1:2"] and trip[0].source_ids == ["D1:3"]
    for items in before:
        assert [i.score for i in items] == sorted((i.score for i in items), reverse=True)
    assert memory.stored_ids() == pf.ALL_TURNS
    # the green note shares "favorite color" with the teal one: A-Mem linked them (strengthen)
    assert (
        memory.stats()
        == loaded.stats()
        == {
            "items": 5,
            "evolutions": 1,
            "tokens_written": 38,
            "writer_calls": 9,  # 5 analyses, 4 evolution decisions (none for the first note)
            "parse_failures": 0,
        }
    )
    assert (tmp_path / adapter.SNAPSHOT).stat().st_size > 0


def test_notes_carry_the_conversations_time_and_links():
    async def go():
        memory = await pf.ingest(SPEC, Gateway.from_config({}))
        return await memory._in_thread(
            memory._memory.retriever.get_by_ids, ["note_000001", "note_000005"]
        )

    notes = asyncio.run(go())
    teal, green = notes["note_000001"], notes["note_000005"]
    assert teal["timestamp"] == 202305081356 and green["timestamp"] == 202306011000
    assert green["last_accessed"] == 202306011000  # A-Mem's datetime.now(): the conversation's
    assert green["links"] == ["note_000001"]
    assert green["tags"] == ["favorite", "color", "green"]


def test_a_rerun_is_served_from_the_cache(tmp_path):
    first, counts, second, again = pf.cached_rerun(SPEC, tmp_path, 3, QUESTIONS)
    assert first == second
    assert pf.writer_tasks(again) == {
        "memory_writer/a_mem_analyze",
        "memory_writer/a_mem_evolve",
    }
    pf.assert_all_from_the_cache(counts, again)


def test_episodes_are_isolated_even_when_they_run_at_once():
    one, two, first, second = pf.two_episodes_at_once(SPEC, QUESTIONS)
    assert first == {"D1:1", "D1:2"} and second == {"D1:3", "D1:4"}
    assert one._folder.name != two._folder.name
    assert two._memory.retriever.collection.count() == 2


def test_a_mem_prompts_reach_an_endpoint_as_a_mem_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible pf.endpoint, the bridge sends A-Mem's own prompt and
    json_schema, at the role's temperature (not A-Mem's 1.0)."""
    seen = []

    def reply(body):
        seen.append(body)
        if "should_evolve" in json.dumps(body.get("response_format")):
            return json.dumps(
                {
                    "should_evolve": True,
                    "actions": ["strengthen"],
                    "suggested_connections": ["note_000001"],
                    "tags_to_update": ["pets"],
                    "new_context_neighborhood": [],
                    "new_tags_neighborhood": [],
                }
            )
        return json.dumps({"keywords": ["beagle"], "context": "Pets.", "tags": ["pets"]})

    with OpenAITestServer(reply=reply) as server:
        items, _, _ = pf.through_endpoint(
            server, SPEC, pf.CONVERSATION[:2], "beagle", 1, tmp_path / "cache", temperature=0.3
        )
    assert [(i.text, i.source_ids) for i in items] == [
        ("Melanie: I adopted a beagle named Biscuit.\ncontext: Pets.", ["D1:2"])
    ]
    analysis, evolution = seen[1], seen[2]  # A-Mem analyses the second note, then evolves it
    assert analysis["messages"][0]["content"] == "You must respond with a JSON object."
    assert analysis["messages"][1]["content"].endswith(
        "Content for analysis:\n            Melanie: I adopted a beagle named Biscuit."
    )
    assert analysis["response_format"]["type"] == "json_schema"
    assert "memory_id:note_000001" in evolution["messages"][1]["content"]
    assert {body["temperature"] for body in seen} == {0.3}


def test_a_model_call_from_an_unknown_site_is_an_error_and_nothing_phones_home():
    async def go():
        memory = await pf.ingest(SPEC, Gateway.from_config({}), pf.CONVERSATION[:1])
        llm = memory._memory.llm_controller.llm
        with pytest.raises(RuntimeError, match="call site the mnemoflow bridge does not know"):
            await memory._in_thread(llm.get_completion, "Summarize.", {"type": "json_object"})
        return memory

    memory = asyncio.run(go())
    embedder = memory._memory.retriever.collection._embedding_function
    assert type(embedder).__name__ == "GatewayEmbeddingFunction"
    assert memory._memory.retriever.client.get_settings().anonymized_telemetry is False
    import litellm

    assert litellm.model_cost  # the cost map litellm ships, not one fetched from GitHub
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_a_failed_call_is_never_swallowed_by_a_mem(monkeypatch):
    """A-Mem catches every error of its analysis and falls back to 'General'; the adapter
    re-raises the gateway's error instead."""
    from mnemoflow.llm.offline import OfflineBackend

    answer = OfflineBackend.complete

    async def failing(self, request, spec):
        if request.task == "a_mem_analyze" and request.fields["speaker"] == "Melanie":
            raise ValueError("the pf.endpoint is down")
        return await answer(self, request, spec)

    monkeypatch.setattr(OfflineBackend, "complete", failing)
    with pytest.raises(ValueError, match="the pf.endpoint is down"):
        asyncio.run(pf.ingest(SPEC, Gateway.from_config({}), pf.CONVERSATION[:2]))


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    message = pf.missing_install(monkeypatch, "agentic_memory", {"type": "a_mem"})
    assert "systems type a_mem: needs a-mem==0.2.6" in message
    assert "pip install -e '.[products-amem]'" in message and "make install-amem" in message


def test_a_mem_time_is_the_conversations_in_a_mems_format():
    assert adapter.amem_time("2023-05-08T13:56") == "202305081356"
    assert adapter.amem_time("8 May, 2023") == "8 May, 2023"


def test_offline_analysis_leaves_the_speaker_out_and_says_what_it_is():
    reply = json.loads(
        offline.analyze({"speaker": "Ann", "content": "Ann's cat Tom likes the cat flap."})
    )
    assert reply == {
        "keywords": ["cat", "tom", "likes", "flap"],
        "context": "Ann on cat, tom, likes.",
        "tags": ["cat", "tom", "likes"],
    }
    assert json.loads(offline.analyze({"speaker": "Ann", "content": "Ann!"}))["context"] == (
        "General"
    )


def test_offline_evolution_links_neighbours_sharing_two_words_and_rewrites_none():
    def note(note_id, content, tags):
        return {"id": note_id, "speaker": "Ann", "content": content, "keywords": [],
                "context": f"about {note_id}", "tags": tags}  # fmt: skip

    fields = {
        "note": note("new", "My favorite color is green.", ["color"]),
        "neighbours": [
            note("n1", "My favorite color is teal.", ["teal"]),
            note("n2", "I like green tea.", ["tea"]),
        ],
    }
    assert json.loads(offline.evolve(fields)) == {
        "should_evolve": True,
        "actions": ["strengthen"],
        "suggested_connections": ["n1"],
        "tags_to_update": ["color", "favorite"],
        "new_context_neighborhood": ["about n1", "about n2"],
        "new_tags_neighborhood": [["teal"], ["tea"]],
    }
    alone = json.loads(offline.evolve({**fields, "neighbours": fields["neighbours"][1:]}))
    assert alone["should_evolve"] is False and alone["suggested_connections"] == []


def test_a_mem_on_the_amemgym_chain(users, tmp_path):  # noqa: F811  (the fixture)
    """The interactive step chain: the assistant's pairs reach A-Mem, each step's snapshot
    loads, and its notes name the turns they came from."""
    (_, stats), memory = pf.amemgym_chain(users, {"type": "a_mem", "top_k": 5}, tmp_path)
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0
    assert len(memory.stored_ids()) == stats["items"] > 0  # one note per message
