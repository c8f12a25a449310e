"""Round trips, determinism, provenance and failure handling of the memory systems (offline)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from mnemoflow.errors import ConfigError
from mnemoflow.llm.types import Completion
from mnemoflow.memory.base import Message, available, build, check_systems, resolve
from mnemoflow.memory.params import Param, declare_params
from tests.memory_support import REPO, gateway, messages, run, synthetic
from tests.workflow import workdir

SYSTEMS = {
    "dense_message": {},
    "dense_session": {},
    "dense_session_document": {"type": "dense_session", "pooling": "document"},
    "rag": {"update_batch": 2, "local_window": 2, "top_k": 5},
    "agentic_external": {"update_batch": 2, "local_window": 2},
    "agentic_incontext": {"update_batch": 2, "local_window": 2, "max_entries": 8},
    "notes_linked": {"top_k": 3},
    "tiered": {"short_capacity": 3, "heat_threshold": 2.0},
}
QUERIES = ["What is my favorite color?", "What is my home city?", "Tips about lentil soup"]


@pytest.fixture(scope="module")
def episode() -> list[Message]:
    prepared = synthetic(users=1, periods=2, sessions_per_period=3, turns_per_session=6, seed=3)
    turns = prepared.sessions.sort_values(["session_index", "turn_index"])
    return messages(turns)


def _spec(name: str) -> dict:
    params = dict(SYSTEMS[name])
    params.setdefault("type", name)
    return params


def _dump(items) -> list[dict]:
    return [asdict(item) for item in items]


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_add_save_load_retrieve_round_trip(name: str, episode: list[Message], tmp_path: Path):
    """A loaded snapshot answers exactly like the saved one, and keeps ingesting identically."""
    llm = gateway()
    half = len(episode) // 2
    original = build(_spec(name), llm=llm, seed=7)
    run(original.add(episode[:half]))
    original.save(tmp_path)
    restored = build(_spec(name), llm=llm, seed=7)
    restored.load(tmp_path)
    assert restored.stats() == original.stats()
    for query in QUERIES:
        assert _dump(run(restored.retrieve(query, 4))) == _dump(run(original.retrieve(query, 4)))
    run(original.add(episode[half:]))
    run(restored.add(episode[half:]))
    for query in QUERIES:
        assert _dump(run(restored.retrieve(query, 4))) == _dump(run(original.retrieve(query, 4)))
    assert restored.stats() == original.stats()


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_deterministic_and_every_source_is_a_turn(name: str, episode: list[Message]):
    """Two fresh builds with the same seed agree; every item cites unified turn ids."""
    turn_ids = {m.turn_id for m in episode}
    results = []
    for _ in range(2):
        system = build(_spec(name), llm=gateway(), seed=1)
        run(system.add(episode))
        results.append([_dump(run(system.retrieve(q))) for q in QUERIES])
        stats = system.stats()
        assert stats["items"] > 0 and stats["tokens_written"] > 0 and "writer_calls" in stats
    assert results[0] == results[1]
    for items in results[0]:
        assert items
        for item in items:
            assert item["source_ids"] and set(item["source_ids"]) <= turn_ids, item


def test_rag_buffer_follows_amemgym_batches():
    """RAG-(2, 3, k): at 2+3 buffered messages the oldest 2 are written, 3 stay in context."""
    system = build({"type": "rag", "update_batch": 2, "local_window": 3}, llm=gateway())
    turns = [Message(f"t{i}", "s", "user", f"message number {i} about apples") for i in range(7)]
    run(system.add(turns[:4]))
    assert system.stats()["items"] == 0 and system.stats()["buffered"] == 4
    run(system.add(turns[4:5]))  # 5 = a + b: t0, t1 written
    assert system.stats()["items"] == 2 and system.stats()["buffered"] == 3
    run(system.add(turns[5:]))  # 5, 6 -> buffer t2..t6 = 5 again: t2, t3 written
    assert system.stats()["items"] == 4 and system.stats()["buffered"] == 3
    items = run(system.retrieve("apples", 10))
    assert [i.id for i in items[-3:]] == ["window:t4", "window:t5", "window:t6"]
    assert sorted(i.id for i in items[:-3]) == ["t0", "t1", "t2", "t3"]


def _facts_conversation() -> list[Message]:
    lines = [
        ("user", "By the way, my favorite color is teal.", "2023-01-01"),
        ("assistant", "Got it, I will keep that in mind.", "2023-01-01"),
        ("user", "My sister's favorite color is red, funny enough.", "2023-01-01"),
        ("assistant", "Noted.", "2023-01-01"),
        ("user", "Update: my favorite color is now crimson.", "2023-02-01"),
        ("assistant", "Thanks for letting me know!", "2023-02-01"),
    ]
    return [
        Message(f"t{i}", f"s{i // 4}", role, text, role, time)
        for i, (role, text, time) in enumerate(lines)
    ]


def test_agentic_external_updates_replace_old_facts():
    system = build(
        {"type": "agentic_external", "update_batch": 2, "local_window": 0}, llm=gateway()
    )
    run(system.add(_facts_conversation()))
    texts = {i.text: i for i in run(system.retrieve("favorite color", 10))}
    assert set(texts) == {
        "User's favorite color is now crimson.",
        "User's sister's favorite color is red, funny enough.",
    }
    updated = texts["User's favorite color is now crimson."]
    assert updated.source_ids == ["t4", "t0"] and updated.time == "2023-02-01"
    stats = system.stats()
    assert (stats["events_add"], stats["events_update"]) == (2, 1)
    assert stats["writer_calls"] == 6  # 3 batches x (extract + decide)


def test_agentic_incontext_merges_keys_with_conversation_time():
    system = build(
        {"type": "agentic_incontext", "update_batch": 2, "local_window": 0}, llm=gateway()
    )
    run(system.add(_facts_conversation()))
    memory = {i.text: (i.source_ids, i.time) for i in run(system.retrieve("anything"))}
    assert memory == {
        "user's sister's favorite color: red": (["t2"], "2023-01-01"),
        "user's favorite color: crimson": (["t4"], "2023-02-01"),
    }


def test_agentic_incontext_is_bounded():
    system = build(
        {"type": "agentic_incontext", "update_batch": 1, "local_window": 0, "max_entries": 2},
        llm=gateway(),
    )
    facts = ["my home city is Lisbon.", "my pet's name is Otis.", "my job title is pilot."]
    run(system.add([Message(f"t{i}", "s", "user", f) for i, f in enumerate(facts)]))
    assert [i.text for i in run(system.retrieve("x"))] == [
        "user's pet's name: Otis",
        "user's job title: pilot",
    ]
    assert system.stats()["evicted"] == 1


def test_notes_link_similar_notes_and_return_neighbours():
    system = build(
        {"type": "notes_linked", "top_k": 1, "link_threshold": 0.3, "neighbours": 1},
        llm=gateway(),
    )
    turns = [
        Message("t0", "s", "user", "My dog Otis loves the beach."),
        Message("t1", "s", "user", "The beach trip with Otis was sunny."),
        Message("t2", "s", "user", "Quarterly taxes are due in April."),
    ]
    run(system.add(turns))
    assert system.stats()["links"] == 1
    items = run(system.retrieve("dog Otis"))
    assert [i.id for i in items] == ["t0", "t1"]  # the hit, then its linked neighbour


def test_tiered_promotes_hot_segments_to_the_profile():
    system = build({"type": "tiered", "short_capacity": 1, "heat_threshold": 2.0}, llm=gateway())
    run(system.add(_facts_conversation()))
    stats = system.stats()
    assert stats["short_pages"] == 1 and stats["mid_pages"] == 2 and stats["promotions"] == 1
    items = run(system.retrieve("What is my favorite color?", 2))
    assert items[0].id == "profile:user's favorite color"
    assert items[0].text == "user's favorite color: teal"  # crimson is still short-term
    assert items[-1].id == "short:t4" and items[-1].source_ids == ["t4", "t5"]


class _GarbageBackend:
    """A memory_writer endpoint whose every reply is prose, never the JSON a writer asks for."""

    def __init__(self, text: str = "Sure! Here are the facts: teal"):
        self.text = text
        self.calls = 0

    async def complete(self, request, spec):
        self.calls += 1
        return Completion(text=self.text, model="broken")

    async def aclose(self):
        return None


def _broken_writer_gateway(text: str = "Sure! Here are the facts: teal"):
    llm = gateway()
    llm._backends["memory_writer"] = _GarbageBackend(text)
    return llm


@pytest.mark.parametrize(
    "name", ["agentic_external", "agentic_incontext", "notes_linked", "tiered"]
)
def test_malformed_writer_replies_are_re_asked_counted_and_skipped(
    name: str, episode: list[Message]
):
    llm = _broken_writer_gateway()
    system = build(_spec(name), llm=llm)
    run(system.add(episode))
    stats = system.stats()
    entries = [e for k, e in llm.ledger.entries.items() if k.startswith("memory_writer/")]
    calls, hits = sum(e.calls for e in entries), sum(e.cache_hits for e in entries)
    failures, reasks = sum(e.parse_failures for e in entries), sum(e.reasks for e in entries)
    asked = stats["writer_calls"]
    assert asked >= 1 and stats["parse_failures"] == asked  # every ask failed and was skipped
    # the gateway counted each failure once, after 1 + max_parse_retries (2) attempts
    assert (failures, reasks) == (asked, 2 * asked)
    assert calls == 3 * asked  # identical asks are served from the cache
    assert llm.backend("memory_writer").calls == calls - hits
    run(system.retrieve("What is my favorite color?"))  # a skipped update leaves a usable memory


def test_parse_failures_reach_the_ledger(episode: list[Message]):
    llm = _broken_writer_gateway("{not json")
    system = build({"type": "notes_linked"}, llm=llm)
    run(system.add(episode[:3]))
    entry = llm.ledger.entries["memory_writer/memory_note"]
    assert (entry.calls, entry.reasks, entry.parse_failures) == (9, 6, 3)


def test_unknown_or_bad_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="unknown parameters"):
        build({"type": "rag", "top_n": 3}, llm=gateway())
    with pytest.raises(ConfigError, match="update_batch"):
        build({"type": "agentic_external", "update_batch": 0}, llm=gateway())
    with pytest.raises(ConfigError, match="pooling"):
        build({"type": "dense_session", "pooling": "mean"}, llm=gateway())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"type": "bm25_message", "top_k": -3},
            "systems.mine.top_k: -3 is less than the minimum of 1",
        ),
        (
            {"type": "bm25_session", "top_k": "five"},
            "systems.mine.top_k: 'five' is not of type 'integer'",
        ),
        (
            {"type": "bm25_message", "backend": "lucene"},
            "systems.mine.backend: 'lucene' is not one of",
        ),
        (
            {"type": "full_context", "max_tokens": "lots"},
            "systems.mine.max_tokens: 'lots' is not of type",
        ),
        (
            {"type": "dense_message", "top_k": 5.0},
            "systems.mine.top_k: 5.0 is not of type 'integer'",
        ),
        (
            {"type": "dense_message", "top_k": True},
            "systems.mine.top_k: True is not of type 'integer'",
        ),
        (
            {"type": "rag", "local_window": -1},
            "systems.mine.local_window: -1 is less than the minimum of 0",
        ),
        (
            {"type": "agentic_incontext", "max_entries": 0},
            "systems.mine.max_entries: 0 is less than",
        ),
        (
            {"type": "notes_linked", "link_threshold": 2},
            "systems.mine.link_threshold: 2 is greater than",
        ),
        (
            {"type": "tiered", "recency_tau": 0},
            "systems.mine.recency_tau: 0 is less than or equal to",
        ),
    ],
)
def test_bad_parameter_values_name_the_config_entry(spec, message):
    with pytest.raises(ConfigError) as caught:
        build(spec, llm=gateway(), name="mine")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        check_systems({"ok": {"type": "none"}, "mine": spec})


def test_every_builtin_parameter_has_a_schema_its_default_satisfies():
    for name in available():
        cls = resolve(name)
        assert set(cls.params_schema) == set(cls.defaults), name
        cls.check_params(dict(cls.defaults), f"systems.{name}")  # defaults are valid values


def test_declare_params_gives_defaults_and_schemas_from_one_table():
    defaults, schema = declare_params(
        top_k=Param(5, "integer", minimum=1),
        mode=Param("kv", enum=["kv", "organizer"]),
        free=Param(None),
    )
    assert defaults == {"top_k": 5, "mode": "kv", "free": None}
    assert list(defaults) == ["top_k", "mode", "free"]
    # type first, then the further keywords; a parameter with no check has no schema
    assert schema == {
        "top_k": {"type": "integer", "minimum": 1},
        "mode": {"enum": ["kv", "organizer"]},
    }
    assert list(schema["top_k"]) == ["type", "minimum"]
    assert resolve("tiered").defaults["recency_tau"] == 50.0
    assert resolve("tiered").params_schema["recency_tau"] == {
        "type": "number",
        "exclusiveMinimum": 0,
    }
    # the shared write-buffer parameters come first, as declared
    assert list(resolve("rag").defaults) == ["update_batch", "local_window", "top_k"]


def test_the_default_config_systems_are_valid():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    check_systems(config["systems"])
    with pytest.raises(ConfigError, match="^systems.broken: needs 'type'"):
        check_systems({"broken": {"top_k": 3}})


def test_systems_resolve_by_name_and_class_path():
    assert resolve("dense_message").__name__ == "DenseMessage"
    assert resolve("mnemoflow.memory.systems.tiered:Tiered").name == "tiered"


def test_snapshot_is_plain_files(episode: list[Message], tmp_path: Path):
    system = build({"type": "agentic_external"}, llm=gateway())
    run(system.add(episode))
    system.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "buffer.jsonl",
        "items.jsonl",
        "items.npy",
        "state.json",
    ]
    # 36 messages, 4 kept in the local window: 16 batches of 2 written, one extract call each,
    # and one update call for each of the 13 batches that extracted a fact
    assert json.loads((tmp_path / "state.json").read_text())["writer_calls"] == 16 + 13


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_empty_memory_saves_loads_and_retrieves_nothing(name: str, tmp_path: Path):
    system = build(_spec(name), llm=gateway())
    system.save(tmp_path)
    restored = build(_spec(name), llm=gateway())
    restored.load(tmp_path)
    assert run(restored.retrieve("anything")) == run(system.retrieve("anything")) == []
    assert restored.stats() == system.stats()


def test_workflow_rejects_a_bad_system_parameter_before_any_job(tmp_path):
    wd = workdir(tmp_path)
    override = tmp_path / "override.yaml"
    override.write_text("systems:\n  rag: {type: rag, top_k: five}\n")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
               str(wd), "--cores", "1", "--dry-run", "--configfile", str(override)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "systems.rag.top_k: 'five' is not of type 'integer'" in result.stdout + result.stderr
