"""Writers keep what a model writes: list / object values become text, a bad event drops alone.

Each test scripts the ``memory_writer`` endpoint per task (as gpt-4.1-mini replies in practice)
and checks what the memory holds and what the job's ledger counts.
"""

from __future__ import annotations

import json

from mnemoflow.llm.types import Completion
from mnemoflow.memory import writer
from mnemoflow.memory.base import Message, build
from tests.memory_support import gateway, run


class _ScriptedWriter:
    """A memory_writer endpoint answering each task with a fixed JSON reply."""

    def __init__(self, replies: dict[str, object]):
        self.replies = replies
        self.calls = 0

    async def complete(self, request, spec):
        self.calls += 1
        return Completion(text=json.dumps(self.replies[request.task]), model="scripted")

    async def aclose(self):
        return None


def _gateway(replies: dict[str, object]):
    llm = gateway()
    llm._backends["memory_writer"] = _ScriptedWriter(replies)
    return llm


def _pair() -> list[Message]:
    return [
        Message("t0", "s0", "user", "I drink tea and hike; my sister Ann lives in Oslo.", "user"),
        Message("t1", "s0", "assistant", "Noted!", "assistant"),
    ]


def test_value_text_keeps_every_element():
    assert writer.value_text(["tea", " hiking ", ""]) == "tea; hiking"
    assert writer.value_text({"sister": "Ann", "ages": [7, 9]}) == "sister: Ann; ages: 7; 9"
    assert writer.value_text(True) == "true" and writer.value_text(None) == ""


def test_organizer_reply_with_list_and_object_values_is_stored_as_text():
    llm = _gateway(
        {
            writer.ORGANIZE: {
                "Personal Preferences": ["tea", "hiking"],
                "Important Personal Details": {"sister": "Ann", "sister's city": "Oslo"},
            }
        }
    )
    system = build(
        {"type": "agentic_incontext", "prompt": "organizer", "update_batch": 2, "local_window": 0},
        llm=llm,
    )
    run(system.add(_pair()))
    assert [item.text for item in run(system.retrieve("anything"))] == [
        "Personal Preferences: tea; hiking",
        "Important Personal Details: sister: Ann; sister's city: Oslo",
    ]
    stats = system.stats()
    assert (stats["writer_calls"], stats["parse_failures"]) == (1, 0)  # asked once, kept
    assert llm.ledger.entries[f"memory_writer/{writer.ORGANIZE}"].reasks == 0


def test_kv_reply_with_a_list_value_is_stored_as_text():
    llm = _gateway({writer.KV_UPDATE: {"set": [{"key": "hobbies", "value": ["tea", "hiking"]}]}})
    system = build({"type": "agentic_incontext", "update_batch": 2, "local_window": 0}, llm=llm)
    run(system.add(_pair()))
    assert [item.text for item in run(system.retrieve("anything"))] == ["hobbies: tea; hiking"]


def test_one_event_with_an_unknown_id_is_dropped_alone_and_counted():
    llm = _gateway(
        {
            writer.EXTRACT_FACTS: {
                "facts": [
                    {"text": "User drinks tea.", "from": [1]},
                    {"text": "User's sister Ann lives in Oslo.", "from": [1]},
                ]
            },
            writer.UPDATE_FACTS: {
                "memory": [
                    {"event": "ADD", "text": "User drinks tea.", "fact": 0},
                    {"event": "UPDATE", "id": "7", "text": "Ann lives in Oslo.", "fact": 1},
                    {"event": "ADD", "text": "User's sister Ann lives in Oslo.", "fact": 1},
                ]
            },
        }
    )
    system = build({"type": "agentic_external", "update_batch": 2, "local_window": 0}, llm=llm)
    run(system.add(_pair()))
    held = sorted(item.text for item in run(system.retrieve("tea", 10)))
    assert held == ["User drinks tea.", "User's sister Ann lives in Oslo."]
    stats = system.stats()
    assert (stats["events_add"], stats["dropped_events"], stats["parse_failures"]) == (2, 1, 0)
    entry = llm.ledger.entries[f"memory_writer/{writer.UPDATE_FACTS}"]
    assert (entry.dropped_events, entry.parse_failures, entry.reasks) == (1, 0, 0)
    assert llm.ledger.to_dict()["totals"]["dropped_events"] == 1


def test_dropped_events_survive_a_snapshot(tmp_path):
    replies = {
        writer.EXTRACT_FACTS: {"facts": [{"text": "User drinks tea.", "from": [1]}]},
        writer.UPDATE_FACTS: {"memory": [{"event": "DELETE", "id": "3"}]},
    }
    spec = {"type": "agentic_external", "update_batch": 2, "local_window": 0}
    system = build(spec, llm=_gateway(replies))
    run(system.add(_pair()))
    system.save(tmp_path)
    loaded = build(spec, llm=gateway())
    loaded.load(tmp_path)
    assert loaded.stats()["dropped_events"] == 1 and loaded.stats()["items"] == 0


def test_a_reply_without_a_memory_list_is_still_unparseable():
    assert writer.parse_events({"events": []}, 1, set()) is None
    assert writer.parse_events({"memory": [{"event": "MERGE"}, "x"]}, 1, set()) == ([], 2)
