"""The custom-system example of docs/memory.md, registered by ``class:`` path or entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.lexical import content_words
from mnemoflow.memory.base import (
    MemoryItem,
    MemorySystem,
    Message,
    available,
    build,
    load_messages,
    resolve,
    save_messages,
)
from tests.memory_support import run


# --- begin docs/memory.md example ---
class KeywordRecent(MemorySystem):
    """The newest messages that share a word with the query."""

    name = "keyword_recent"
    defaults = {"top_k": 5, "window": 200}
    params_schema = {  # JSON Schema per parameter, checked when the workflow starts
        "top_k": {"type": "integer", "minimum": 1},
        "window": {"type": "integer", "minimum": 1},
    }

    def __init__(self, params=None, llm=None, seed=0):
        super().__init__(params, llm, seed)
        self.messages: list[Message] = []

    async def add(self, messages, meta=None):
        self.messages = (self.messages + list(messages))[-self.params["window"] :]

    async def retrieve(self, query, k=None):
        k = k or self.params["top_k"]
        words = set(content_words(query))
        hits = [m for m in reversed(self.messages) if words & set(content_words(m.content))]
        return [
            MemoryItem(m.turn_id, f"{m.speaker}: {m.content}", 1.0, [m.turn_id], m.time)
            for m in hits[:k]
        ]

    def save(self, directory: Path):
        save_messages(directory / "messages.jsonl", self.messages)

    def load(self, directory: Path):
        self.messages = load_messages(directory / "messages.jsonl")

    def stats(self):
        return {"items": len(self.messages), "tokens_written": 0, "writer_calls": 0}


# --- end docs/memory.md example ---


def test_custom_system_by_class_path_round_trips(tmp_path: Path):
    spec = json.loads('{"class": "tests.test_memory_custom:KeywordRecent", "top_k": 2}')
    system = build(spec)
    turns = [Message(f"t{i}", "s", "user", f"note {i} about tea", "user") for i in range(4)]
    run(system.add(turns))
    assert [i.id for i in run(system.retrieve("tea?"))] == ["t3", "t2"]
    system.save(tmp_path)
    again = build(spec)
    again.load(tmp_path)
    assert run(again.retrieve("tea?")) == run(system.retrieve("tea?"))


def test_docs_show_the_example_verbatim():
    docs = Path(__file__).resolve().parents[1] / "docs" / "memory.md"
    source = Path(__file__).read_text()
    example = source.split("# --- begin docs/memory.md example ---\n")[1].split("\n\n# --- end")[0]
    assert example.strip() in docs.read_text()


def _entry_points(monkeypatch, **targets: str) -> None:
    """Make ``importlib.metadata`` list ``name=module:attr`` entry points of mnemoflow.memory."""
    import importlib.metadata

    from mnemoflow.memory import base

    listed = [
        importlib.metadata.EntryPoint(name, value, "mnemoflow.memory")
        for name, value in targets.items()
    ]

    def entry_points(group: str):
        return [entry for entry in listed if entry.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    base.available()  # the built-ins first, so that the copy below holds them
    monkeypatch.setattr(base.SYSTEMS, "entries", dict(base.SYSTEMS.entries))  # forget the rest


def test_custom_system_by_entry_point_is_found_by_type_name(monkeypatch):
    _entry_points(
        monkeypatch,
        keyword_recent="tests.test_memory_custom:KeywordRecent",
        rag="tests.test_memory_custom:KeywordRecent",  # cannot shadow a built-in
    )
    system = build({"type": "keyword_recent", "top_k": 1})
    assert isinstance(system, KeywordRecent) and "keyword_recent" in available()
    assert resolve("rag").__module__ == "mnemoflow.memory.systems.rag"
    run(system.add([Message("t1", "s", "user", "green tea please", "user")]))
    assert [item.id for item in run(system.retrieve("tea"))] == ["t1"]
    with pytest.raises(ConfigError, match="^systems.keyword_recent.window: 0 is less than"):
        build({"type": "keyword_recent", "window": 0})


def test_broken_entry_points_are_config_errors(monkeypatch):
    _entry_points(monkeypatch, gone="no_such_module_xyz:Memory")
    with pytest.raises(ConfigError, match="entry point 'gone' .* cannot be loaded"):
        resolve("gone")
    _entry_points(monkeypatch, plain="tests.test_memory_custom:_entry_points")
    with pytest.raises(ConfigError, match="entry point 'plain' .* is not a MemorySystem subclass"):
        resolve("plain")
