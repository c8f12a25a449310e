"""Offline answers to LangMem's memory-manager call (langmem 0.0.30, system ``langmem``).

The bridge in ``mnemoflow/memory/products/langmem.py`` tags the one model call of each manager
step ``langmem_manage_memories`` and passes what LangMem built its prompt from, so this handler
never reads LangMem's prompt text. Fields: ``messages`` [{n, speaker, role, time, content}] (the
batch), ``memories`` [{id, text}] (the stored memories LangMem shows, by the ids it patches them
by) and ``tools`` (the function names offered).

It is the offline writer's fact extraction and ADD / UPDATE / DELETE / NONE decisions
(``writer.py``) in LangMem's tool calls. LangMem's prompt asks for memories from the whole
conversation, so every speaker's first-person statements are read (mem0's prompt reads the
user's only). A new fact is a ``Memory`` call ``{"content": fact}``; a fact that changes a shown
memory is trustcall's ``PatchDoc`` replacing its ``/content``; a fact that negates one is
``RemoveDoc`` when the request offers it (LangMem's ``enable_deletes``), otherwise nothing, as
the model cannot delete then; a memory no fact touches is left alone (LangMem keeps what the
reply does not mention). With nothing to write, the reply is a short text when nothing is shown
(trustcall leaves the choice of tools to the model then), and otherwise — trustcall requires a
call once memories are shown — a ``PatchDoc`` of the first shown memory with no patches, which
trustcall applies as no change.
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.llm.offline import ToolCalls, handles
from mnemoflow.llm.offline.writer import extract, update_facts

NOTHING = "Nothing new to remember."


@handles("langmem_manage_memories")
def manage_memories(fields: dict[str, Any]) -> ToolCalls | str:
    memories = [{"id": str(m["id"]), "text": m["text"]} for m in fields["memories"]]
    texts = {m["id"]: m["text"] for m in memories}
    facts = [{"text": f["text"]} for f in extract(fields["messages"])]
    decided = json.loads(update_facts({"facts": facts, "memories": memories}))["memory"]
    offered = set(fields["tools"])
    calls: list[dict[str, Any]] = []
    for event in decided:
        kind = event["event"]
        if kind == "ADD" and "Memory" in offered:
            calls.append({"name": "Memory", "arguments": {"content": event["text"]}})
        elif kind == "UPDATE" and "PatchDoc" in offered:
            patch = {"op": "replace", "path": "/content", "value": event["text"]}
            plan = f"replace /content: {texts[event['id']]!r} -> {event['text']!r}"
            calls.append(
                {
                    "name": "PatchDoc",
                    "arguments": {"json_doc_id": event["id"], "planned_edits": plan,
                                  "patches": [patch]},
                }
            )  # fmt: skip
        elif kind == "DELETE" and "RemoveDoc" in offered:
            calls.append({"name": "RemoveDoc", "arguments": {"json_doc_id": event["id"]}})
    if calls:
        return ToolCalls(calls)
    if memories and "PatchDoc" in offered:
        plan = "nothing new: no change"
        no_change = {"json_doc_id": memories[0]["id"], "planned_edits": plan, "patches": []}
        return ToolCalls([{"name": "PatchDoc", "arguments": no_change}])
    return NOTHING
