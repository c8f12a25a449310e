"""Offline answers to the model calls of MemoryOS (memoryos-pro 0.1.0).

The bridge in ``mnemoflow/memory/products/memoryos.py`` tags each call by the MemoryOS function
it comes from and passes the pairs it was built from as records ``{user: {speaker, content},
assistant: {speaker, content}, time}`` (a side MemoryOS got as ``(no reply)`` has no speaker),
so these handlers never read MemoryOS's prompt text. Honest lexical heuristics:

- ``memoryos_continuity`` (fields: ``previous`` record or null, ``current``): ``true`` when the
  current pair shares at least two content words with the previous one (a topic carried on),
  else ``false``; MemoryOS then chains the pages and carries the meta summary over.
- ``memoryos_meta_info`` (fields: ``last_meta``, ``current``): the running summary is the
  previous one's last sentence followed by the first sentence each speaker said now
  ("Caroline: ..."), at most two sentences, as the prompt asks.
- ``memoryos_multi_summary`` (fields: ``pages``): one topic (the prompt allows two): theme =
  its three most frequent content words, keywords = its five, content = each pair's first
  sentences. One topic keeps MemoryOS from filing the same pages under two sessions.
- ``memoryos_keywords`` (fields: ``texts``: a page's two sides, or a summary or query): the
  five most frequent content words (ties: first seen), comma-separated.
- ``memoryos_knowledge`` (fields: ``pages``): user private data = the offline writer's
  first-person facts of the user sides (named by speaker); assistant knowledge = the same of
  the assistant sides; ``None`` when there are none — in MemoryOS's two-section reply.
- ``memoryos_profile`` (fields: ``pages``, ``profile``): **not played**. The prompt asks for a
  rating (High / Medium / Low) on 90 personality dimensions, which no lexical heuristic can
  give truthfully; the reply is the existing profile unchanged (``None`` at first), so offline
  MemoryOS has no profile and its retrieval is pages and knowledge only.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mnemoflow.lexical import content_words, sentences
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.writer import extract

NO_PROFILE = ("", "none", "no existing profile data.")


def _sides(record: dict[str, Any]) -> list[dict[str, str]]:
    return [s for s in (record["user"], record["assistant"]) if s.get("speaker")]


def _words(record: dict[str, Any]) -> set[str]:
    return {w for side in _sides(record) for w in content_words(side["content"])}


def _first_sentences(record: dict[str, Any]) -> list[str]:
    out = []
    for side in _sides(record):
        said = sentences(side["content"])
        if said:
            out.append(f"{side['speaker']}: {said[0]}")
    return out


def top_words(texts: list[str], n: int) -> list[str]:
    """The ``n`` most frequent content words of ``texts``, ties by first appearance."""
    counts = Counter(w for text in texts for w in content_words(text))
    order = {w: i for i, w in reversed(list(enumerate(w for t in texts for w in content_words(t))))}
    return sorted(counts, key=lambda w: (-counts[w], order[w]))[:n]


@handles("memoryos_continuity")
def continuity(fields: dict[str, Any]) -> str:
    previous = fields["previous"]
    if previous is None:
        return "false"
    return "true" if len(_words(previous) & _words(fields["current"])) >= 2 else "false"


@handles("memoryos_meta_info")
def meta_info(fields: dict[str, Any]) -> str:
    kept = sentences(fields["last_meta"] or "")[-1:]
    return " ".join(kept + _first_sentences(fields["current"])[: 2 - len(kept)])


@handles("memoryos_multi_summary")
def multi_summary(fields: dict[str, Any]) -> str:
    texts = [side["content"] for record in fields["pages"] for side in _sides(record)]
    if not texts:
        return "[]"
    content = " ".join(s for record in fields["pages"] for s in _first_sentences(record))
    topic = {
        "theme": " ".join(top_words(texts, 3)),
        "keywords": top_words(texts, 5),
        "content": content,
    }
    return json.dumps([topic], ensure_ascii=False)


@handles("memoryos_keywords")
def keywords(fields: dict[str, Any]) -> str:
    return ", ".join(top_words(fields["texts"], 5))


def _facts(pages: list[dict[str, Any]], side: str) -> list[str]:
    records = [
        {"n": n, "speaker": p[side]["speaker"], "content": p[side]["content"]}
        for n, p in enumerate(pages, start=1)
        if p[side].get("speaker")
    ]
    return [f"- {fact['text']}" for fact in extract(records)]


@handles("memoryos_knowledge")
def knowledge(fields: dict[str, Any]) -> str:
    user = _facts(fields["pages"], "user") or ["None"]
    assistant = _facts(fields["pages"], "assistant") or ["None"]
    return "\n".join(["【User Private Data】", *user, "【Assistant Knowledge】", *assistant])


@handles("memoryos_profile")
def profile(fields: dict[str, Any]) -> str:
    existing = (fields["profile"] or "").strip()
    return "None" if existing.lower() in NO_PROFILE else existing
