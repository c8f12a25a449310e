"""A-Mem (``a_mem``: a-mem 0.2.6) behind the MemorySystem API, every model call through the
gateway, offline.

``make test`` (install-test) installs the extra ``products-amem``, so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import a_mem as offline
from mnemoflow.memory.base import Message, build
from mnemoflow.memory.products import a_mem as adapter
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
SPEC = {"type": "a_mem", "top_k": 3}


async def ingest(gateway: Gateway, messages=CONVERSATION, **params):
    memory = build({**SPEC, **params}, llm=gateway)
    await memory.add(messages)
    return memory


def test_items_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    async def go():
        gateway = Gateway.from_config({})
        memory = await ingest(gateway)
        before = [await memory.retrieve(q, 3) for q in QUESTIONS]
        memory.save(tmp_path)
        loaded = build(SPEC, llm=gateway)
        loaded.load(tmp_path)
        after = [await loaded.retrieve(q, 3) for q in QUESTIONS]
        return memory, loaded, before, after

    memory, loaded, before, after = asyncio.run(go())
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
    assert memory.stored_ids() == {"D1:1", "D1:2", "D1:3", "D1:4", "D2:1"}
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
        memory = await ingest(Gateway.from_config({}))
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
    async def once():
        gateway = Gateway.from_config({}, tmp_path / "cache")
        memory = await ingest(gateway)
        items = [await memory.retrieve(q, 3) for q in QUESTIONS]
        gateway.close()
        return items, gateway.ledger.to_dict()["by_role_task"]

    first, counts = asyncio.run(once())
    second, again = asyncio.run(once())
    assert first == second
    assert {key for key in again if key.startswith("memory_writer/")} == {
        "memory_writer/a_mem_analyze",
        "memory_writer/a_mem_evolve",
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
    assert two._memory.retriever.collection.count() == 2


def test_a_mem_prompts_reach_an_endpoint_as_a_mem_wrote_them(tmp_path):
    """Bound to an OpenAI-compatible endpoint, the bridge sends A-Mem's own prompt and
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

    async def go(server):
        binding = {"base_url": server.base_url, "model": "m", "temperature": 0.3}
        gateway = Gateway.from_config({"memory_writer": binding}, tmp_path / "cache")
        memory = await ingest(gateway, CONVERSATION[:2])
        items = await memory.retrieve("beagle", 1)
        await gateway.aclose()
        return items

    with OpenAITestServer(reply=reply) as server:
        items = asyncio.run(go(server))
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
        memory = await ingest(Gateway.from_config({}), CONVERSATION[:1])
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
            raise ValueError("the endpoint is down")
        return await answer(self, request, spec)

    monkeypatch.setattr(OfflineBackend, "complete", failing)
    with pytest.raises(ValueError, match="the endpoint is down"):
        asyncio.run(ingest(Gateway.from_config({}), CONVERSATION[:2]))


def test_a_missing_install_is_one_line_naming_the_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "agentic_memory", None)  # as if a-mem were not installed
    with pytest.raises(ConfigError) as error:
        build({"type": "a_mem"}, llm=Gateway.from_config({}))
    message = str(error.value)
    assert "\n" not in message
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
    spec = {"type": "a_mem", "top_k": 5}
    results = run_chain(users, spec, tmp_path, interactive_gateway(), steps=2)
    stats = results[1].manifest["stats"]["ben"]
    assert stats["pairs_written"] == 4 and stats["writer_calls"] > 0
    memory = build(spec, llm=interactive_gateway())
    memory.load(tmp_path / "step1" / "ben")
    assert all(t.startswith("ben_p") for t in memory.stored_ids())
    assert len(memory.stored_ids()) == stats["items"] > 0  # one note per message


@pytest.mark.slow
def test_a_workflow_runs_a_mem_on_the_synthetic_benchmark(tmp_path):
    micro, ledger = run_synthetic_workflow(tmp_path, "a_mem", {"type": "a_mem", "top_k": 5})
    assert micro["turn_evidence_recall"] > 0.5 and micro["accuracy"] > 0.5, micro
    assert ledger["memory_writer/a_mem_analyze"]["calls"] > 0
    assert ledger["memory_writer/a_mem_evolve"]["calls"] > 0
