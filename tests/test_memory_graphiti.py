"""Graphiti (``graphiti``): graphiti-core 0.31.2 on embedded Kuzu behind the MemorySystem API,
every model call through the gateway, offline.

The extra ``products`` is installed by ``make test`` (install-test), so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import graphiti as offline_graphiti
from mnemoflow.memory.products import graphiti
from mnemoflow.testing.openai_server import OpenAITestServer
from tests import products_fixtures as pf
from tests.products_fixtures import users  # noqa: F401  (a fixture)

#: The graphiti prompts one pf.ingest of pf.CONVERSATION calls (offline), by ledger key.
TASKS = {
    f"memory_writer/graphiti.{p}"
    for p in (
        "extract_nodes.extract_message",
        "extract_edges.edge",
        "extract_edges.extract_timestamps",
        "dedupe_edges.resolve_edge",
    )
}


SPEC = {"type": "graphiti"}


def test_facts_name_their_turns_and_a_loaded_snapshot_answers_identically(tmp_path):
    memory, _, before, after = pf.round_trip(SPEC, tmp_path, 3)
    assert before == after
    colour, dog, trip = before
    # The newer colour contradicts the older one: graphiti invalidates it as of the
    # conversation's date (the pinned clock), and both stay searchable.
    assert [(i.text, i.source_ids) for i in colour[:2]] == [
        ("Caroline's favorite color is teal. (no longer true from 2023-06-01)", ["D1:1"]),
        ("Caroline's favorite color is now green.", ["D2:1"]),
    ]
    assert colour[1].time == "2023-06-01T10:00"
    assert (dog[0].text, dog[0].source_ids) == ("Melanie adopted a beagle named Biscuit.", ["D1:2"])
    assert trip[0].source_ids == ["D1:3"] and trip[0].score > trip[1].score > 0
    assert memory.stored_ids() == pf.ALL_TURNS
    stats = memory.stats()
    assert stats["episodes"] == 5 and stats["items"] == 6 and stats["parse_failures"] == 0
    # Kuzu preallocates ~35 MB; the snapshot is compressed.
    assert (tmp_path / graphiti.SNAPSHOT).stat().st_size < 1_000_000


def test_a_rerun_is_served_from_the_cache(tmp_path):
    first, counts, second, again = pf.cached_rerun(SPEC, tmp_path, 3)
    assert first == second
    assert pf.writer_tasks(again) == TASKS
    pf.assert_all_from_the_cache(counts, again)


def test_episodes_are_isolated_even_when_ingested_at_once():
    """Two memories ingesting side by side on one event loop: each keeps its own clock, ids and
    database (the pinned clock and ids are per task, not per process)."""
    one, two, first, second = pf.two_episodes_at_once(SPEC)
    assert first == {"D1:1", "D1:2"} and second == {"D1:3", "D1:4"}
    assert one._folder.name != two._folder.name
    alone = asyncio.run(pf.ingest(SPEC, Gateway.from_config({}), pf.CONVERSATION[2:4]))
    assert alone.facts == two.facts and alone.episodes == two.episodes  # the same ids


def test_graphitis_prompts_reach_an_endpoint_with_their_schema_and_the_conversations_time(
    tmp_path,
):
    """Bound to an OpenAI-compatible pf.endpoint, the bridge sends graphiti's own prompts with its
    json_schema response_format, dated as the conversation; a rerun reaches it not once."""
    seen = []

    def reply(body):
        seen.append(body)
        name = body["response_format"]["json_schema"]["name"]
        if name == "ExtractedEntities":
            names = ["Caroline", "teal"]
            return json.dumps(
                {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]}
            )
        if name == "ExtractedEdges":
            edge = {
                "source_entity_name": "Caroline",
                "target_entity_name": "teal",
                "relation_type": "LIKES_COLOR",
                "fact": "Caroline's favourite colour is teal",
            }
            return json.dumps({"edges": [edge]})
        if name == "EdgeTimestamps":
            return json.dumps({"valid_at": "2023-05-08T13:56:00Z", "invalid_at": None})
        return "{}"

    def go(server):
        cache = tmp_path / "cache"
        return pf.through_endpoint(server, SPEC, pf.CONVERSATION[:1], "favourite colour", 1, cache)[
            0
        ]

    with OpenAITestServer(reply=reply) as server:
        items = go(server)
        calls = len(seen)
        assert go(server) == items and len(seen) == calls  # all from the cache
    assert [(i.text, i.source_ids) for i in items] == [
        ("Caroline's favourite colour is teal", ["D1:1"])
    ]
    names = [body["response_format"]["json_schema"]["name"] for body in seen]
    assert names == ["ExtractedEntities", "ExtractedEdges", "EdgeTimestamps"]
    extraction = seen[0]["messages"][-1]["content"]
    assert "Caroline: My favorite color is teal." in extraction
    assert "Respond with a JSON object in the following format" in extraction
    facts = seen[1]["messages"][-1]["content"]
    assert "2023-05-08 13:56:00+00:00" in facts  # the reference time: the conversation's


def test_a_reply_that_never_fits_graphitis_schema_is_counted_not_guessed(tmp_path):
    with OpenAITestServer(reply=lambda body: '{"entities": "none"}') as server:
        _, memory, _ = pf.through_endpoint(server, SPEC, pf.CONVERSATION[:1], cache=tmp_path)
    stats = memory.stats()
    assert stats["parse_failures"] == stats["writer_calls"] > 0 and stats["items"] == 0


def test_the_clock_is_the_conversations_never_the_wall_clock():
    assert graphiti.reference_time("2023-05-08T13:56").isoformat() == "2023-05-08T13:56:00+00:00"
    assert graphiti.reference_time("8 May, 2023") == graphiti.NO_TIME
    assert graphiti.reference_time("") == graphiti.NO_TIME


def test_a_missing_extra_is_one_line_naming_the_install(monkeypatch):
    message = pf.missing_install(monkeypatch, "graphiti_core", SPEC)
    assert "systems type graphiti: needs graphiti-core==0.31.2" in message
    assert "pip install -e '.[products]'" in message


def _message(speaker: str, content: str) -> dict:
    return {"turn_id": "D1:1", "speaker": speaker, "content": content, "time": ""}


def test_offline_entities_are_the_speaker_names_and_stated_values():
    fields = {"message": _message("Ann", "I moved to Lisbon with Bob. My favorite color is red.")}
    reply = json.loads(offline_graphiti.extract_entities(fields))["extracted_entities"]
    assert [e["name"] for e in reply] == ["Ann", "Lisbon", "Bob", "red"]


def test_offline_a_statement_naming_nothing_is_about_its_object():
    said = "I went to a support group yesterday."
    assert offline_graphiti.object_phrase(said) == "support group"
    assert offline_graphiti.object_phrase("I'm so excited about painting these days.") == "painting"
    assert offline_graphiti.object_phrase("That sounds great!") is None  # not a statement
    edges = offline_graphiti.facts("Ann", said, offline_graphiti.entity_names("Ann", said))
    assert [(e["relation_type"], e["target_entity_name"], e["fact"]) for e in edges] == [
        ("WENT", "support group", "Ann went to a support group yesterday.")
    ]


def test_offline_facts_link_the_speaker_to_what_the_sentence_names():
    nodes = ["Ann", "Lisbon", "Bob", "red"]
    said = "I moved to Lisbon with Bob. My favorite color is red. Nice weather."
    edges = offline_graphiti.facts("Ann", said, nodes)
    assert [
        (e["source_entity_name"], e["relation_type"], e["target_entity_name"]) for e in edges
    ] == [
        ("Ann", "MOVED", "Lisbon"),
        ("Ann", "MOVED", "Bob"),
        ("Ann", "FAVORITE_COLOR", "red"),
    ]
    assert edges[0]["fact"] == "Ann moved to Lisbon with Bob."


def test_offline_dedupe_finds_duplicates_and_contradictions():
    context = {
        "new_edge": "Ann's favorite color is green.",
        "existing_edges": [{"idx": 0, "fact": "Ann's favorite color is green"}],
        "edge_invalidation_candidates": [
            {"idx": 1, "fact": "Ann's favorite color is red."},
            {"idx": 2, "fact": "Ann moved to Lisbon."},
        ],
    }
    reply = json.loads(offline_graphiti.resolve_edge({"context": context}))
    assert reply == {"duplicate_facts": [0], "contradicted_facts": [1]}
    nodes = {
        "extracted_nodes": [{"id": 0, "name": "ann's"}, {"id": 1, "name": "Porto"}],
        "existing_nodes": [{"candidate_id": 0, "name": "Ann"}],
    }
    resolved = json.loads(offline_graphiti.resolve_nodes({"context": nodes}))
    assert [r["duplicate_candidate_id"] for r in resolved["entity_resolutions"]] == [0, -1]


def test_graphiti_on_the_amemgym_chain(users, tmp_path):  # noqa: F811  (the fixture)
    """The interactive protocol's step chain (a one-user AMemGym fixture): the assistant's
    pairs reach graphiti, step 1 continues step 0's loaded graph, and its facts name their turns."""
    (first, second), memory = pf.amemgym_chain(users, {"type": "graphiti", "top_k": 5}, tmp_path)
    assert second["pairs_written"] == 4 and second["episodes"] > first["episodes"] > 0
    assert memory.stored_ids()
