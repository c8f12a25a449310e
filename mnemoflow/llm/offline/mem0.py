"""Offline answers to the model calls of Mem0 (mem0ai 1.0.11, the papers' pipeline and Mem0-G).

The bridge in ``mnemoflow/memory/products/mem0_paper.py`` tags each call mem0 makes by the call
site it comes from and passes the structured inputs mem0 built the prompt from, so these
handlers never read mem0's prompt text. They are the offline writer's heuristics
(``writer.py``) in mem0's reply formats, plus honest lexical heuristics for the graph:

- ``mem0_extract_facts`` (fields: ``messages`` [{n, speaker, role, time, content}]): mem0's
  user-memory prompt asks for facts *from the user's messages only*, so only records with role
  ``user`` are read; first-person statements become facts naming the speaker, as the offline
  writer's ``memory_extract_facts``. Reply ``{"facts": [text, ...]}``.
- ``mem0_update_memory`` (fields: ``memories`` [{id, text}] with mem0's temporary ids,
  ``facts`` [text]): the offline writer's ADD / UPDATE / DELETE / NONE decisions, in mem0's
  format (every event carries text, an UPDATE its ``old_memory``, and each memory shown that no
  fact touches is listed as NONE, as mem0's prompt asks).
- ``mem0_graph_entities`` (fields: ``text``, ``messages`` (the batch when adding, empty when
  searching), ``self``): an ``extract_entities`` call naming the proper nouns (runs of
  capitalised words not opening a sentence, or capitalised again elsewhere), the speaker of
  every first-person sentence, and the value of every first-person "X is Y" statement.
- ``mem0_graph_relations`` (fields as above plus ``entities``): an ``establish_relationships``
  call: per sentence, its subject (the speaker of a first-person sentence, else the first entity
  it mentions) is linked to every other entity it mentions, named by the content words between
  the two mentions ("visited", "works_at"; ``related_to`` when none), and each first-person
  "X is Y" becomes (speaker, X, Y).
- ``mem0_graph_deletions`` (fields: ``existing`` [{source, relationship, destination}], the
  batch): a ``delete_graph_memory`` call for every stored relation a new "X is Y" statement of
  the same speaker contradicts (same relationship, other value) or a negated sentence names;
  otherwise a short text reply (mem0 then deletes nothing).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.lexical import content_words, sentences
from mnemoflow.llm.offline import ToolCalls, handles
from mnemoflow.llm.offline.writer import (
    COPULA,
    FIRST_PERSON,
    NEGATION,
    extract,
    split_fact,
    statement,
    update_facts,
)


@handles("mem0_extract_facts")
def extract_facts(fields: dict[str, Any]) -> str:
    users = [m for m in fields["messages"] if m.get("role") == "user"]
    return json.dumps({"facts": [f["text"] for f in extract(users)]}, ensure_ascii=False)


@handles("mem0_update_memory")
def update_memory(fields: dict[str, Any]) -> str:
    memories = [{"id": str(m["id"]), "text": m["text"]} for m in fields["memories"]]
    texts = {m["id"]: m["text"] for m in memories}
    decided = json.loads(
        update_facts({"facts": [{"text": f} for f in fields["facts"]], "memories": memories})
    )["memory"]
    out: list[dict[str, Any]] = []
    touched: set[str] = set()
    new_ids = len(memories)
    for event in decided:
        kind = event["event"]
        if kind == "ADD":
            out.append({"id": str(new_ids), "text": event["text"], "event": "ADD"})
            new_ids += 1
            continue
        mid = event["id"]
        touched.add(mid)
        if kind == "UPDATE":
            out.append(
                {"id": mid, "text": event["text"], "event": "UPDATE", "old_memory": texts[mid]}
            )
        else:  # DELETE and NONE name the memory's own text, as mem0 applies only events with text
            out.append({"id": mid, "text": texts[mid], "event": kind})
    for memory in memories:
        if memory["id"] not in touched:
            out.append({"id": memory["id"], "text": memory["text"], "event": "NONE"})
    return json.dumps({"memory": out}, ensure_ascii=False)


# --- the graph (Mem0-G) ------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z][\w'’-]*")


def _name(text: str) -> str:
    """mem0's node name: lower case, spaces as underscores, no possessive ending."""
    text = re.sub(r"['’]s$", "", text.strip())
    return "_".join(text.lower().split())


def _lines(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """(speaker, sentence) of every sentence: the batch's when adding, the text's otherwise."""
    records = fields.get("messages") or []
    if records:
        return [(r["speaker"], s) for r in records for s in sentences(r["content"])]
    return [("", s) for s in sentences(fields["text"])]


def proper_nouns(sentence_list: list[str]) -> list[str]:
    """Runs of capitalised words that are names (as mem0 names nodes): not the sentence's first
    word, unless that word is capitalised again somewhere else in the text; "I" is never one."""
    return list(dict.fromkeys(_name(span) for span in proper_noun_spans(sentence_list)))


def proper_noun_spans(sentence_list: list[str]) -> list[str]:
    """The names of :func:`proper_nouns` as written ("New York"), in order of first mention."""
    spans: list[list[str]] = []
    elsewhere: set[str] = set()
    for sentence in sentence_list:
        words = _WORD.findall(sentence)
        elsewhere.update(w for w in words[1:] if w[0].isupper())
    for sentence in sentence_list:
        words = _WORD.findall(sentence)
        run: list[str] = []
        for position, word in enumerate(words):
            capital = word[0].isupper() and word not in ("I", "I'm", "I've", "I'd", "I'll")
            if capital and (position > 0 or word in elsewhere):
                run.append(word)
                continue
            if run:
                spans.append(run)
            run = []
        if run:
            spans.append(run)
    return list(dict.fromkeys(" ".join(span) for span in spans))


def _speaker_facts(fields: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(speaker, relationship, value) of every first-person "X is Y" statement."""
    out = []
    for speaker, sentence in _lines(fields):
        if not speaker or statement(sentence) is None:
            continue
        for fact in extract([{"n": 1, "speaker": speaker, "content": sentence}]):
            subject, value = split_fact(fact["text"])
            copula = COPULA.search(fact["text"])
            head = fact["text"][: copula.start()] if copula else ""
            attribute = [w.removesuffix("'s") for w in content_words(head)]
            attribute = [w for w in attribute if w not in (speaker.lower(), "now", "currently")]
            if subject and value and attribute and len(value.split()) <= 4:
                out.append((_name(speaker), "_".join(attribute), _name(value)))
    return out


def graph_entities(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, type) of the entities of the text, in order of first mention."""
    lines = _lines(fields)
    found: dict[str, str] = {}
    for speaker, sentence in lines:
        if speaker and FIRST_PERSON.search(sentence):
            found.setdefault(_name(speaker), "person")
    for noun in proper_nouns([s for _, s in lines]):
        found.setdefault(noun, "entity")
    if not any(speaker for speaker, _ in lines) and FIRST_PERSON.search(fields["text"]):
        found.setdefault(_name(fields["self"]), "person")  # a first-person query: the user
    for _, _, value in _speaker_facts(fields):
        found.setdefault(value, "attribute")
    return list(found.items())


@handles("mem0_graph_entities")
def entities(fields: dict[str, Any]) -> ToolCalls:
    found = [{"entity": name, "entity_type": kind} for name, kind in graph_entities(fields)]
    return ToolCalls([{"name": "extract_entities", "arguments": {"entities": found}}])


def _mentions(sentence: str, entity: str) -> int:
    """Where ``entity`` (a node name) is mentioned in ``sentence``, or -1."""
    match = re.search(rf"\b{re.escape(entity.replace('_', ' '))}\b", sentence.lower())
    return match.start() if match else -1


def graph_relations(fields: dict[str, Any]) -> list[dict[str, str]]:
    names = [_name(e) for e in fields["entities"]]
    out: dict[tuple[str, str, str], None] = {}
    for speaker, sentence in _lines(fields):
        placed = sorted((at, n) for n in names if (at := _mentions(sentence, n)) >= 0)
        if speaker and statement(sentence) is not None:
            subject, start = _name(speaker), 0
        elif placed:
            start, subject = placed[0]
            start += len(subject)
        else:
            continue
        lowered = sentence.lower()
        for at, other in placed:
            if other == subject or at < start:
                continue
            between = [w for w in content_words(lowered[start:at]) if w not in names][:3]
            out[(subject, "_".join(between) or "related_to", other)] = None
    for triple in _speaker_facts(fields):
        out[triple] = None
    return [{"source": s, "relationship": r, "destination": d} for s, r, d in out]


@handles("mem0_graph_relations")
def relations(fields: dict[str, Any]) -> ToolCalls:
    found = graph_relations(fields)
    return ToolCalls([{"name": "establish_relationships", "arguments": {"entities": found}}])


@handles("mem0_graph_deletions")
def deletions(fields: dict[str, Any]) -> str | ToolCalls:
    new = {(s, r): d for s, r, d in _speaker_facts(fields)}
    negated = [s.lower() for _, s in _lines(fields) if NEGATION.search(s)]
    calls = []
    for rel in fields["existing"]:
        source, relationship, destination = rel["source"], rel["relationship"], rel["destination"]
        contradicted = new.get((source, relationship)) not in (None, destination)
        denied = any(
            _mentions(s, destination) >= 0 and (_mentions(s, source) >= 0 or FIRST_PERSON.search(s))
            for s in negated
        )
        if contradicted or denied:
            arguments = {"source": source, "relationship": relationship, "destination": destination}
            calls.append({"name": "delete_graph_memory", "arguments": arguments})
    return ToolCalls(calls) if calls else "No relationship needs to be deleted."
