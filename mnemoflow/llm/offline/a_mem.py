"""Offline answers to the model calls of A-Mem (a-mem 0.2.6).

The bridge in ``mnemoflow/memory/products/a_mem.py`` tags each call by the A-Mem method it comes
from and passes the note (its speaker and own words) and, for an evolution, the neighbours A-Mem
showed (id, speaker, words, keywords, context, tags, in A-Mem's order), so these handlers never
read A-Mem's prompt text. Honest lexical heuristics, in A-Mem's JSON replies:

- ``a_mem_analyze`` (fields: ``speaker``, ``content``): keywords = the five most frequent
  content words (ties: first seen), the speaker's name left out as the prompt asks; context =
  ``"<speaker> on <three most frequent content words>."`` (a topic line, not a summary of
  arguments or audience, which no lexical heuristic can state truthfully); tags = the three
  most frequent content words — A-Mem asks for broad categories (domain, format, type), which
  these are not: they are a lexical stand-in, said here rather than dressed up.
- ``a_mem_evolve`` (fields: ``note`` {speaker, content, keywords, context, tags},
  ``neighbours`` [{id, speaker, content, keywords, context, tags}]): the note evolves when a
  neighbour shares at least two content words with it; the action is ``strengthen`` only:
  link to those neighbours (A-Mem's ids, as shown), the note's tags extended by the shared
  words (at most five). ``update_neighbor`` is **not played**: rewriting another note's
  context is a judgement about its meaning; the neighbours' contexts and tags are returned
  unchanged (A-Mem's schema requires the lists).
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.lexical import content_words
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.memoryos import top_words


def _without_speaker(words: list[str], speaker: str) -> list[str]:
    names = set(content_words(speaker))
    return [w for w in words if w.split("'")[0] not in names]  # "ann's" names Ann too


@handles("a_mem_analyze")
def analyze(fields: dict[str, Any]) -> str:
    speaker, content = fields["speaker"], fields["content"]
    words = _without_speaker(top_words([content], 8), speaker)
    context = f"{speaker} on {', '.join(words[:3])}." if words else "General"
    reply = {"keywords": words[:5], "context": context, "tags": words[:3]}
    return json.dumps(reply, ensure_ascii=False)


@handles("a_mem_evolve")
def evolve(fields: dict[str, Any]) -> str:
    note, neighbours = fields["note"], fields["neighbours"]
    own = set(content_words(note["content"]))
    linked, shared = [], []
    for neighbour in neighbours:
        common = own & set(content_words(neighbour["content"]))
        if len(common) >= 2:
            linked.append(neighbour["id"])
            shared += sorted(common - set(shared))
    tags = list(dict.fromkeys(list(note["tags"]) + shared))[: max(5, len(note["tags"]))]
    reply = {
        "should_evolve": bool(linked),
        "actions": ["strengthen"] if linked else [],
        "suggested_connections": linked,
        "tags_to_update": tags if linked else list(note["tags"]),
        "new_context_neighborhood": [n["context"] for n in neighbours],
        "new_tags_neighborhood": [list(n["tags"]) for n in neighbours],
    }
    return json.dumps(reply, ensure_ascii=False)
