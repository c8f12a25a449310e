"""The agentic memories with ``memory_writer`` bound to an OpenAI-compatible endpoint.

The local test server plays a model that answers each writer task with JSON of the shape
docs/memory.md documents. It tells the tasks apart by their system prompt, as a real model would
(the task tag itself never leaves the gateway). The embedder stays offline. What each memory
stores and retrieves must be the server's facts, keys and keywords, not the offline writer's; one
malformed reply per system must be counted as a parse failure and skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory import writer
from mnemoflow.memory.base import Message, build
from mnemoflow.testing.openai_server import OpenAITestServer, original_body
from tests.memory_support import run

#: keyword in a user message -> the (key, value) the scripted model extracts from it
SCRIPT = {
    "Miso": ("user's pet", "a cat named Miso"),
    "Lisbon": ("user's home city", "Lisbon"),
    "hibiscus": ("user's favorite drink", "hibiscus tea"),
    "bicycle": ("user's bicycle", "a red one"),
}
BROKEN = "bicycle"  # any request that shows this message gets a reply that is not JSON
TURNS = [
    ("user", "I adopted a cat named Miso last spring."),
    ("assistant", "Lovely, cats are great company."),
    ("user", "I live in Lisbon, near the river."),
    ("assistant", "What a beautiful city."),
    ("user", "My bicycle is the red one in the hall."),
    ("assistant", "Noted."),
    ("user", "My favorite drink is hibiscus tea."),
    ("assistant", "Sounds refreshing."),
]
TASK_OF_PROMPT = {
    writer.EXTRACT_FACTS_SYSTEM: writer.EXTRACT_FACTS,
    writer.UPDATE_FACTS_SYSTEM: writer.UPDATE_FACTS,
    writer.KV_UPDATE_SYSTEM: writer.KV_UPDATE,
    writer.NOTE_SYSTEM: writer.NOTE,
}
NUMBERED = re.compile(r"^\[(\d+)\] [^:]*: (.*)$", re.MULTILINE)


def scripted_writer(body: dict[str, Any]) -> str:
    """The model's reply to one writer request: JSON of the task's documented shape (a re-ask
    gets the reply to its original prompt: this writer repeats itself whatever it is told)."""
    messages = original_body(body)["messages"]
    system, user = messages[0]["content"], messages[-1]["content"]
    task = TASK_OF_PROMPT[system]
    if BROKEN in user and task != writer.UPDATE_FACTS:
        return '{"facts": [ {"text": "truncated'
    found = [
        (int(n), *SCRIPT[word])
        for n, content in NUMBERED.findall(user)
        for word in SCRIPT
        if word in content
    ]
    if task == writer.EXTRACT_FACTS:
        return json.dumps({"facts": [{"text": f"{k} is {v}", "from": [n]} for n, k, v in found]})
    if task == writer.UPDATE_FACTS:
        new = re.findall(r"^(\d+)\. (.*)$", user.split("New facts:")[1], re.MULTILINE)
        events = [{"event": "ADD", "text": text, "fact": int(i)} for i, text in new]
        return json.dumps({"memory": events})
    if task == writer.KV_UPDATE:
        sets = [{"key": k, "value": v, "from": [n]} for n, k, v in found]
        return json.dumps({"set": sets, "delete": []})
    words = [w for w in SCRIPT if w in user]  # memory_note: one message, "speaker: content"
    return json.dumps({"keywords": [w.upper() for w in words], "tags": ["t"], "context": "c"})


def conversation() -> list[Message]:
    """Four two-turn sessions (so tiered's segments, one per session, are promoted one by one)."""
    return [
        Message(f"t{i}", f"s{i // 2}", role, content, role, f"2026-01-0{1 + i // 2}")
        for i, (role, content) in enumerate(TURNS)
    ]


async def add_and_retrieve(spec: dict[str, Any], base_url: str, query: str):
    llm = Gateway.from_config({"memory_writer": {"base_url": base_url, "model": "m"}})
    try:
        memory = build(spec, llm=llm)
        await memory.add(conversation())
        return memory, llm, await memory.retrieve(query)
    finally:
        await llm.aclose()


# (spec, task of the malformed reply, query, expected texts retrieved, their source turn ids)
CASES = {
    "agentic_external": (
        {"type": "agentic_external", "update_batch": 2, "local_window": 0, "top_k": 1},
        writer.EXTRACT_FACTS,
        "What pet do I have?",
        ["user's pet is a cat named Miso"],
        [["t0"]],
    ),
    "agentic_incontext": (
        {"type": "agentic_incontext", "update_batch": 2, "local_window": 0},
        writer.KV_UPDATE,
        "What do I drink?",
        [
            "user's pet: a cat named Miso",
            "user's home city: Lisbon",
            "user's favorite drink: hibiscus tea",
        ],
        [["t0"], ["t2"], ["t6"]],
    ),
    "tiered": (
        {"type": "tiered", "short_capacity": 0, "heat_threshold": 1.0, "top_k": 0, "profile_k": 1},
        writer.KV_UPDATE,
        "user's favorite drink",
        ["user's favorite drink: hibiscus tea"],
        [["t6"]],
    ),
    "notes_linked": (
        {"type": "notes_linked", "top_k": 1, "neighbours": 0},
        writer.NOTE,
        "a cat named Miso",
        ["user: I adopted a cat named Miso last spring. [keywords: MISO]"],
        [["t0"]],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_agentic_memory_stores_what_the_endpoint_writer_replies(name):
    spec, broken_task, query, texts, sources = CASES[name]
    with OpenAITestServer(reply=scripted_writer) as server:
        memory, llm, items = run(add_and_retrieve(spec, server.base_url, query))
        answered = sum(server.stats().answered.values())
    stats = memory.stats()
    # every writer call went to the endpoint; the one malformed reply was asked twice more
    # (max_parse_retries 2: re-asked with a follow-up, which the scripted writer ignores)
    assert stats["writer_calls"] >= 1 and answered == stats["writer_calls"] + 2
    assert [item.text for item in items] == texts
    assert [item.source_ids for item in items] == sources
    # The malformed reply (the request that showed the bicycle turn) is counted and skipped.
    assert stats["parse_failures"] == 1
    entry = llm.ledger.entries[f"memory_writer/{broken_task}"]
    assert (entry.parse_failures, entry.reasks) == (1, 2)
    everything = run(memory.retrieve("bicycle red hall", k=50))
    assert not any("a red one" in item.text or "BICYCLE" in item.text for item in everything)
