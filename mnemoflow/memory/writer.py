"""The ``memory_writer`` role: every prompt the agentic memories send, and how replies are read.

One section per writer task, each with the system prompt, the rendered user message, and the
JSON contract the reply must satisfy. The same request carries the structured ``fields`` that the
embedded offline backend reads (``mnemoflow/llm/offline/writer.py``), so a system behaves the same
way offline and with a real model.

Which system uses which task:

- ``agentic_external`` (mem0-style): ``memory_extract_facts`` then ``memory_update_facts``.
- ``agentic_incontext`` and ``tiered`` (long-term profile): ``memory_kv_update``.
- ``agentic_incontext`` with ``prompt: organizer`` (AMemGym AWI): ``memory_organize``, whose
  "Types of Information to Remember" section is the system's (evolvable) ``memory_types``.
- ``notes_linked`` (A-Mem-style): ``memory_note``.

Each request passes its contract to the gateway as the parser (:func:`contract_parser`): a reply
that is not valid JSON of the expected shape is re-asked up to the role's ``max_parse_retries``.
One still unparseable after the last attempt is counted (by the gateway in the ledger's
``parse_failures``, and in the system's own ``parse_failures`` stat) and skipped: the memory keeps
its previous state and the job goes on, so a report shows how often it happened. A contract
rejects only what cannot be used: a list or object value becomes text (:func:`value_text`), and
one bad event of ``memory_update_facts`` is dropped and counted (``dropped_events``) while the
others apply, as the references (AMemGym AWI's dict merge, mem0's per-event loop) do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from mnemoflow.llm.types import ChatRequest, UnparseableReply, prompt_request
from mnemoflow.memory.base import Message

ROLE = "memory_writer"
EXTRACT_FACTS = "memory_extract_facts"
UPDATE_FACTS = "memory_update_facts"
KV_UPDATE = "memory_kv_update"
NOTE = "memory_note"

EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")


def message_fields(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as numbered records (numbers let the writer cite its sources)."""
    return [
        {
            "n": n,
            "speaker": m.speaker or m.role,
            "role": m.role,
            "time": m.time,
            "content": m.content,
        }
        for n, m in enumerate(messages, start=1)
    ]


def _render_messages(records: list[dict[str, Any]]) -> str:
    lines = []
    for r in records:
        stamp = f" ({r['time']})" if r["time"] else ""
        lines.append(f"[{r['n']}] {r['speaker']}{stamp}: {r['content']}")
    return "\n".join(lines)


# --- memory_extract_facts (agentic_external) --------------------------------------------------

EXTRACT_FACTS_SYSTEM = """You curate the long-term memory of a personal assistant.
Read the numbered conversation messages and extract standalone facts worth remembering about the
people in it: preferences, personal details, plans, events, relationships, changes of any of these.
Each fact must be understandable on its own: name the person instead of "I"/"my", and keep dates.
Skip greetings, questions, and the assistant's own advice.

Reply with JSON only, exactly this shape:
{"facts": [{"text": "<one standalone fact>", "from": [<message numbers it came from>]}]}
Reply {"facts": []} when there is nothing worth remembering."""


def extract_facts_request(messages: list[Message]) -> ChatRequest:
    records = message_fields(messages)
    prompt = "Messages:\n" + _render_messages(records)
    return prompt_request(
        ROLE, EXTRACT_FACTS, prompt, {"messages": records}, system=EXTRACT_FACTS_SYSTEM
    )


def parse_facts(data: Any, n_messages: int) -> list[tuple[str, list[int]]] | None:
    """(fact text, 1-based message numbers) pairs; None when the shape is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("facts"), list):
        return None
    out = []
    for fact in data["facts"]:
        if isinstance(fact, str):
            fact = {"text": fact}
        if not isinstance(fact, dict) or not isinstance(fact.get("text"), str):
            return None
        sources = [
            int(n) for n in fact.get("from") or [] if isinstance(n, int) and 1 <= n <= n_messages
        ]
        if fact["text"].strip():
            out.append((fact["text"].strip(), sources))
    return out


# --- memory_update_facts (agentic_external) ---------------------------------------------------

UPDATE_FACTS_SYSTEM = """You maintain a memory of facts about a user. You get new facts and the
stored memories most similar to them (each with an id). For every new fact decide one event:
- ADD: new information not in memory.
- UPDATE: it changes or refines a stored memory (give that memory's id and the new full text;
  the newer statement wins).
- DELETE: it says a stored memory is no longer true (give that memory's id).
- NONE: already stored, nothing to change (give that memory's id).
Use only ids from the list. Keep every fact standalone.

Reply with JSON only, exactly this shape:
{"memory": [{"event": "ADD|UPDATE|DELETE|NONE", "id": "<stored id, not for ADD>",
             "text": "<memory text, for ADD and UPDATE>", "fact": <index of the new fact>}]}"""


def update_facts_request(facts: list[str], memories: list[dict[str, str]]) -> ChatRequest:
    listing = "\n".join(f"- id {m['id']}: {m['text']}" for m in memories) or "(empty)"
    new = "\n".join(f"{i}. {fact}" for i, fact in enumerate(facts))
    prompt = f"Stored memories:\n{listing}\n\nNew facts:\n{new}"
    fields = {"facts": [{"text": f} for f in facts], "memories": memories}
    return prompt_request(ROLE, UPDATE_FACTS, prompt, fields, system=UPDATE_FACTS_SYSTEM)


def parse_events(data: Any, n_facts: int, ids: set[str]) -> tuple[list[dict[str, Any]], int] | None:
    """(valid events, number of dropped events); None when the reply's shape is wrong.

    Events are validated one by one, as mem0 applies them: an event with an unknown kind, an id
    the writer was not shown (UPDATE / DELETE / NONE) or no text (ADD / UPDATE) is dropped and
    counted, and the batch's other events still apply. Rejecting the whole reply for one bad event
    would re-ask and finally skip every good decision with it. Only a reply that is not
    ``{"memory": [...]}`` is unparseable (re-asked, then skipped).
    """
    if not isinstance(data, dict) or not isinstance(data.get("memory"), list):
        return None
    events, dropped = [], 0
    for event in data["memory"]:
        valid = _event(event, n_facts, ids)
        if valid is None:
            dropped += 1
        else:
            events.append(valid)
    return events, dropped


def _event(event: Any, n_facts: int, ids: set[str]) -> dict[str, Any] | None:
    """One validated event, or None when it cannot be applied."""
    if not isinstance(event, dict) or event.get("event") not in EVENTS:
        return None
    kind = event["event"]
    text = event.get("text")
    target = None if event.get("id") is None else str(event["id"])
    if kind != "ADD" and target not in ids:
        return None
    if kind in ("ADD", "UPDATE") and not (isinstance(text, str) and text.strip()):
        return None
    fact = event.get("fact")
    fact = fact if isinstance(fact, int) and 0 <= fact < n_facts else None
    return {"event": kind, "id": target, "text": (text or "").strip(), "fact": fact}


def value_text(value: Any) -> str:
    """A JSON value written as a memory value, as text that keeps all of it.

    gpt-4.1-mini often writes a category's information as a list (or an object). AMemGym's AWI
    merges whatever ``json.loads`` returns (``memories |= reply``) and its prompt shows the value
    with Python's ``str``, so the reader sees every element; here the value becomes text holding
    the same information: a list's elements joined by "; ", an object as "key: value" pairs joined
    by "; " (one line, as the memory prompt shows one entry per line), numbers and booleans as
    JSON, null as "" (the reference's None overwrites the old value too). Nested values recurse.
    """
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, list):
        return "; ".join(text for text in (value_text(v) for v in value) if text)
    if isinstance(value, dict):
        return "; ".join(f"{str(k).strip()}: {value_text(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


# --- memory_kv_update (agentic_incontext, tiered) ---------------------------------------------

KV_UPDATE_SYSTEM = """You maintain a small key -> value memory about the people in a conversation;
the whole memory is shown to the assistant in every prompt, so keep it compact.
Given the current memory and new numbered messages, return the changes:
- "set": keys to add or overwrite, with short values (e.g. "user's favorite color": "teal").
  Reuse an existing key when the new message is about the same thing; the newer value wins.
- "delete": keys that are no longer true.
Timestamps come from the conversation, not from today's date.

Reply with JSON only, exactly this shape:
{"set": [{"key": "<key>", "value": "<value>", "from": [<message numbers>]}], "delete": ["<key>"]}"""


def kv_update_request(memory: list[dict[str, str]], messages: list[Message]) -> ChatRequest:
    records = message_fields(messages)
    listing = "\n".join(f"- {m['key']}: {m['value']} ({m['time']})" for m in memory) or "(empty)"
    prompt = f"Current memory:\n{listing}\n\nMessages:\n" + _render_messages(records)
    fields = {"memory": memory, "messages": records}
    return prompt_request(ROLE, KV_UPDATE, prompt, fields, system=KV_UPDATE_SYSTEM)


def parse_kv(
    data: Any, n_messages: int
) -> tuple[list[tuple[str, str, list[int]]], list[str]] | None:
    if not isinstance(data, dict):
        return None
    sets, deletes = data.get("set", []), data.get("delete", [])
    if not isinstance(sets, list) or not isinstance(deletes, list):
        return None
    out = []
    for entry in sets:
        if not isinstance(entry, dict):
            return None
        key, value = entry.get("key"), entry.get("value")
        if not isinstance(key, str) or value is None or not key.strip():
            return None
        sources = [
            int(n) for n in entry.get("from") or [] if isinstance(n, int) and 1 <= n <= n_messages
        ]
        out.append((key.strip(), value_text(value), sources))
    if not all(isinstance(k, str) for k in deletes):
        return None
    return out, [k.strip() for k in deletes]


# --- memory_organize (agentic_incontext with prompt: organizer; AMemGym AWI) -----------------

ORGANIZE = "memory_organize"

#: The "Types of Information to Remember" AWI starts with (AMemGym's info-type init: seven
#: categories). Self-evolving AWI rewrites it; it is part of the system's state.
MEMORY_TYPES = "\n".join(
    (
        "1. Personal Preferences: likes, dislikes and specific preferences about food, products, "
        "activities and entertainment.",
        "2. Important Personal Details: names, relationships and important dates.",
        "3. Plans and Intentions: upcoming events, trips, goals and other plans the user shares.",
        "4. Activity and Service Preferences: preferences for dining, travel, hobbies and other "
        "services.",
        "5. Health and Wellness: dietary restrictions, fitness routines and other wellness "
        "details.",
        "6. Professional Details: job titles, work habits, career goals and other professional "
        "information.",
        "7. Miscellaneous: favourite books, movies, brands and other details the user shares.",
    )
)

ORGANIZE_INTRO = """You are a Personal Information Organizer: you keep a user's memories as a
mapping from information types to what is known about them, so that a later conversation can be
personalized.

Types of Information to Remember:

```
"""

ORGANIZE_RULES = """
```

You get the current memories (information type -> information) and a conversation. Return only the
types to add or update: your reply is merged into the memories with a dict union
(`memories |= reply`), so an updated type must keep its key and its value must summarize the
complete updated information (the old value is overwritten). You may add new types of
information. Use only what the user and the assistant said. Return {} when nothing is worth
remembering.

Reply with a JSON object only: {"<information type>": "<information>", ...}"""


def organize_system(memory_types: str = MEMORY_TYPES) -> str:
    """The organizer's system prompt around a types section. Concatenated, never ``format``ted:
    an evolved section holding braces ("{current_memories}", "{}") is kept verbatim."""
    return ORGANIZE_INTRO + memory_types.strip("\n") + ORGANIZE_RULES


def organize_request(
    memory: list[dict[str, str]], messages: list[Message], memory_types: str = MEMORY_TYPES
) -> ChatRequest:
    """AWI's update call: current memories as a dict and the batch as a JSON conversation."""
    records = message_fields(messages)
    current = {m["key"]: m["value"] for m in memory}
    conversation = [{"role": r["role"], "content": r["content"]} for r in records]
    prompt = (
        "Current memories:\n"
        + json.dumps(current, ensure_ascii=False, indent=2)
        + "\n\nConversation:\n"
        + json.dumps(conversation, ensure_ascii=False, indent=2)
    )
    fields = {"memory": memory, "messages": records, "memory_types": memory_types}
    return prompt_request(ROLE, ORGANIZE, prompt, fields, system=organize_system(memory_types))


def parse_organized(data: Any) -> tuple[list[tuple[str, str, list[int]]], list[str]] | None:
    """A flat {type: information} reply as (sets, no deletes): a dict union never deletes.

    Any JSON value is kept (:func:`value_text`), as the reference merges whatever the model wrote;
    only a reply that is not an object, or a blank type name, is unparseable."""
    if not isinstance(data, dict):
        return None
    sets = []
    for key, value in data.items():
        if not str(key).strip():
            return None
        sets.append((str(key).strip(), value_text(value), []))
    return sets, []


# --- memory_note (notes_linked) ---------------------------------------------------------------

NOTE_SYSTEM = """You turn one conversation message into a memory note for later retrieval.
Give the note's keywords (the specific nouns, names and terms, most important first), a few tags
(broad categories such as "preference", "event", "plan", "relationship"), and a one-sentence
context that says what the message is about and who said it.

Reply with JSON only, exactly this shape:
{"keywords": ["..."], "tags": ["..."], "context": "<one sentence>"}"""


def note_request(message: Message) -> ChatRequest:
    speaker = message.speaker or message.role
    stamp = f" ({message.time})" if message.time else ""
    prompt = f"{speaker}{stamp}: {message.content}"
    fields = {"content": message.content, "speaker": speaker, "time": message.time}
    return prompt_request(ROLE, NOTE, prompt, fields, system=NOTE_SYSTEM)


def parse_note(data: Any) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        return None
    keywords, tags, context = data.get("keywords"), data.get("tags", []), data.get("context", "")
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        return None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return None
    if not isinstance(context, str):
        return None
    return {"keywords": keywords, "tags": tags, "context": context.strip()}


# --- calling and reading ----------------------------------------------------------------------

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def loads_json(text: str) -> Any:
    """The JSON object in a reply, tolerating code fences and prose around it; None if none."""
    text = _FENCE.sub("", (text or "").strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            return json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            return None


def contract_parser(contract: Callable[[Any], Any]) -> Callable[[str], Any]:
    """The gateway parser of a writer task: JSON in the reply, then the task's contract.

    Either step failing raises ``UnparseableReply``, so the gateway re-asks.
    """

    def parse(text: str) -> Any:
        value = contract(loads_json(text))
        if value is None:
            raise UnparseableReply("reply is not JSON of the expected shape")
        return value

    return parse


class WriterClient:
    """Sends writer requests for one memory system and counts calls, parse failures and dropped
    events."""

    def __init__(self, llm: Any):
        if llm is None:
            raise ValueError("an agentic memory needs a model gateway (llm) for memory_writer")
        self.llm = llm
        self.calls = 0
        self.parse_failures = 0
        self.dropped_events = 0

    def drop_events(self, task: str, n: int) -> None:
        """Count ``n`` events of a parsed reply that could not be applied, here and in the job's
        ledger (``dropped_events`` of ``memory_writer/<task>``), beside the parse failures."""
        if n:
            self.dropped_events += n
            self.llm.ledger.record_dropped_events(ROLE, task, n)

    async def ask(self, request: ChatRequest, parse: Callable[[Any], Any]) -> Any:
        """The parsed reply, or None (counted, skipped) when no attempt matches the contract."""
        self.calls += 1
        reply = await self.llm.chat(request, parse=contract_parser(parse))
        if not reply.parse_ok:
            self.parse_failures += 1
            return None
        return reply.parsed
