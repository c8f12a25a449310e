"""Offline answers to the model calls of Graphiti (graphiti-core 0.31.2, Zep's engine).

The bridge in ``mnemoflow/memory/products/graphiti.py`` tags each call by the graphiti prompt it
serves (``graphiti.<prompt name>``, e.g. ``graphiti.extract_nodes.extract_message``) and passes
the structured context graphiti built that prompt from (``context``: graphiti's own dict, made
JSON) and the conversation message being ingested (``message``: {turn_id, speaker, content,
time}), so these handlers never read graphiti's prompt text. They are honest lexical
heuristics, in graphiti's response models:

- ``extract_nodes.extract_message`` (ExtractedEntities): the speaker (graphiti's prompt says to
  always extract the speaker), the proper nouns of the message (as the Mem0-G handlers find
  them), the value of every first-person "X is Y" statement ("teal" in "My favorite color is
  teal"), and for a first-person statement that names none of these its object: the run of up
  to three content words after its verb, as written ("support group" in "I went to a support
  group yesterday").
- ``extract_edges.edge`` (ExtractedEdges): per sentence, its subject (the speaker of a
  first-person sentence, else the first entity it mentions) is linked to every other entity of
  ``context.nodes`` the sentence mentions; the fact is the sentence in the third person ("I" ->
  the speaker), the relation the content words between the two mentions in SCREAMING_SNAKE_CASE
  (``RELATES_TO`` when none), or the attribute of an "X is Y" statement (``FAVORITE_COLOR``).
  A sentence that is neither a first-person statement nor names two entities yields no fact
  ("That sounds great!"), so its turn cannot be recalled.
- ``extract_edges.extract_timestamps`` (EdgeTimestamps): no date expression is read; a fact
  holds from the time it was said (``valid_at`` = the reference time), with no end.
- ``dedupe_edges.resolve_edge`` (EdgeDuplicate): an existing fact with the same content words is
  a duplicate; an invalidation candidate is contradicted when the new fact gives the same
  attribute of the same subject another value, or negates it (the offline writer's UPDATE and
  DELETE rules, ``writer.py``).
- ``dedupe_nodes.nodes`` (NodeResolutions): an extracted entity is the existing one with the
  same name up to case, spacing and a possessive ending; otherwise new (-1).
- ``extract_nodes.extract_summaries_batch`` / ``extract_entity_summaries_from_episodes``
  (SummarizedEntities): an entity's summary gains the message's sentences that mention it (the
  speaker's: its first-person sentences, in the third person), kept to graphiti's 1,000
  characters (the latest kept).

Graphiti's other prompts (custom entity / edge attributes, communities, sagas, node
classification, the combined extraction path) are not called by the adapter's configuration; a
call would fail as any unknown task does, never with a made-up reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.lexical import _WORD as WORD
from mnemoflow.lexical import STOPWORDS, content_words, sentences
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.mem0 import _speaker_facts, proper_noun_spans
from mnemoflow.llm.offline.writer import (
    COPULA,
    FIRST_PERSON,
    NEGATION,
    TIME_WORDS,
    _negates,
    _third_person,
    split_fact,
    statement,
)

PREFIX = "graphiti."
#: graphiti-core's MAX_SUMMARY_CHARS.
SUMMARY_CHARS = 1000
#: Words that end an object phrase: time adverbs, and the start of a new clause.
PHRASE_END = TIME_WORDS | {"yesterday", "tomorrow", "week", "weekend", "month", "year", "days"}
ARTICLES = frozenset({"a", "an", "the"})


def _key(name: str) -> str:
    """A name compared as graphiti's dedupe prompt asks: case, spacing, possessive aside."""
    name = re.sub(r"['’]s$", "", name.strip())
    return " ".join(name.casefold().split())


def _mentioned(sentence: str, name: str) -> int:
    """Where ``name`` is mentioned in ``sentence`` (whole words, any case), or -1."""
    match = re.search(rf"\b{re.escape(_key(name))}\b", sentence.casefold())
    return match.start() if match else -1


def _record(fields: dict[str, Any]) -> tuple[str, str]:
    message = fields["message"]
    return message["speaker"], message["content"]


def object_phrase(sentence: str) -> str | None:
    """What a first-person statement is about when it names nothing: the run of (up to three)
    content words that follows its verb, as written, articles allowed inside ("I went to a
    support group yesterday" -> "support group"); ``None`` for any other sentence."""
    core = statement(sentence)
    if core is None:
        return None
    verb_seen, phrase = False, []
    for token in WORD.finditer(core):
        word = token.group(0).lower()
        content = word not in STOPWORDS and not word.startswith("i'")
        if not verb_seen:
            verb_seen = content
            continue
        if content and word not in PHRASE_END and len(phrase) < 3:
            phrase.append(token)
        elif phrase and not (word in ARTICLES and len(phrase) < 3):
            break
    if not phrase:
        return None
    return core[phrase[0].start() : phrase[-1].end()]


def entity_names(speaker: str, content: str) -> list[str]:
    """The entities of one message, in order: speaker, proper nouns, "X is Y" values, and the
    object of each first-person statement that names none of those."""
    found: dict[str, str] = {}
    if speaker:
        found[_key(speaker)] = speaker
    for span in proper_noun_spans(sentences(content)):
        name = re.sub(r"['’]s$", "", span)
        found.setdefault(_key(name), name)
    record = {"messages": [{"speaker": speaker, "content": content}], "text": content}
    for _, _, value in _speaker_facts(record) if speaker else ():
        name = value.replace("_", " ")
        found.setdefault(_key(name), name)
    for sentence in sentences(content) if speaker else ():
        named = [n for n in found if n != _key(speaker) and _mentioned(sentence, n) >= 0]
        phrase = None if named else object_phrase(sentence)
        if phrase:
            found.setdefault(_key(phrase), phrase)
    return list(found.values())


@handles(PREFIX + "extract_nodes.extract_message")
def extract_entities(fields: dict[str, Any]) -> str:
    speaker, content = _record(fields)
    entities = [{"name": n, "entity_type_id": 0} for n in entity_names(speaker, content)]
    return json.dumps({"extracted_entities": entities}, ensure_ascii=False)


def _relation(words: list[str]) -> str:
    return "_".join(w.upper().replace("'", "") for w in words[:3]) or "RELATES_TO"


def facts(speaker: str, content: str, nodes: list[str]) -> list[dict[str, Any]]:
    """Graphiti edges of one message between the entities ``nodes``."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for sentence in sentences(content):
        core = statement(sentence) if speaker else None
        placed = sorted((at, n) for n in nodes if (at := _mentioned(sentence, n)) >= 0)
        if core is not None:
            subject, start, text = speaker, sentence.casefold().find(core.casefold()), core
        elif placed:
            (start, subject), text = placed[0], sentence
            start += len(subject)
        else:
            continue
        fact = _third_person(text, speaker) if FIRST_PERSON.search(text) else text
        copula = COPULA.search(fact)
        attribute, value = split_fact(fact)
        for at, other in placed:
            if _key(other) == _key(subject) or at < start:
                continue
            between = sentence.casefold()[start:at]
            words = [
                w
                for w in content_words(between)
                if w not in map(_key, nodes) and not w.startswith("i'")
            ]
            if copula and attribute and _mentioned(value, other) >= 0:
                head = fact[: copula.start()]
                words = [w.removesuffix("'s") for w in content_words(head)]
                words = [w for w in words if w != _key(subject)]
            edge = {
                "source_entity_name": subject,
                "target_entity_name": other,
                "relation_type": _relation(words),
                "fact": fact,
                "episode_indices": [0],
            }
            out.setdefault((subject, edge["relation_type"], other), edge)
    return list(out.values())


@handles(PREFIX + "extract_edges.edge")
def extract_edges(fields: dict[str, Any]) -> str:
    speaker, content = _record(fields)
    nodes = [n["name"] for n in fields["context"]["nodes"]]
    return json.dumps({"edges": facts(speaker, content, nodes)}, ensure_ascii=False)


@handles(PREFIX + "extract_edges.extract_timestamps")
def extract_timestamps(fields: dict[str, Any]) -> str:
    return json.dumps({"valid_at": fields["context"]["reference_time"], "invalid_at": None})


def _same(a: str, b: str) -> bool:
    return set(content_words(a)) == set(content_words(b))


def contradicts(new: str, old: str) -> bool:
    """The new fact makes the old one false: same attribute of the same subject with another
    value, or a negation of what it says."""
    subject, value = split_fact(new)
    old_subject, old_value = split_fact(old)
    if NEGATION.search(new):
        return _negates(new, old_subject, old_value)
    return bool(subject) and subject == old_subject and not _same(value, old_value)


@handles(PREFIX + "dedupe_edges.resolve_edge")
def resolve_edge(fields: dict[str, Any]) -> str:
    context = fields["context"]
    new = context["new_edge"]
    duplicates = [e["idx"] for e in context["existing_edges"] if _same(e["fact"], new)]
    candidates = context["existing_edges"] + context["edge_invalidation_candidates"]
    contradicted = [e["idx"] for e in candidates if contradicts(new, e["fact"])]
    return json.dumps({"duplicate_facts": duplicates, "contradicted_facts": contradicted})


@handles(PREFIX + "dedupe_nodes.nodes")
def resolve_nodes(fields: dict[str, Any]) -> str:
    context = fields["context"]
    existing = {_key(n["name"]): n["candidate_id"] for n in reversed(context["existing_nodes"])}
    resolutions = [
        {
            "id": n["id"],
            "name": n["name"],
            "duplicate_candidate_id": existing.get(_key(n["name"]), -1),
        }
        for n in context["extracted_nodes"]
    ]
    return json.dumps({"entity_resolutions": resolutions}, ensure_ascii=False)


@handles(
    PREFIX + "extract_nodes.extract_summaries_batch",
    PREFIX + "extract_nodes.extract_entity_summaries_from_episodes",
)
def summarize(fields: dict[str, Any]) -> str:
    speaker, content = _record(fields)
    out = []
    for entity in fields["context"]["entities"]:
        name, summary = entity["name"], entity.get("summary") or ""
        said = []
        for sentence in sentences(content):
            if _key(name) == _key(speaker) and statement(sentence) is not None:
                said.append(_third_person(sentence, speaker))
            elif _mentioned(sentence, name) >= 0:
                said.append(_third_person(sentence, speaker))
        new = " ".join([summary, *said]).strip()
        if said:
            out.append({"name": name, "summary": new[-SUMMARY_CHARS:].lstrip()})
    return json.dumps({"summaries": out}, ensure_ascii=False)
