"""Offline handlers of the interactive family (AMemGym): the state-revealing user, the assistant's
turn in a session, a multiple-choice pick and a state recall.

Honest heuristics that read only the request's structured fields:

- the user continues with a templated follow-up about one of the schema's *type names* (which the
  reference shows it; never a value, and nothing repeated from the first query);
- the assistant acknowledges the message's topic words and brings up the remembered user
  statement that best matches it (so what it says depends on its memory, as a real assistant's);
- a multiple-choice pick is the option whose words the context covers best (ties: the first);
- a recall picks, per info type, the choice mentioned latest in the context, and leaves out a type
  the context never mentions (a missing type is a wrong recall, not a guess).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from mnemoflow.lexical import content_words, sentences, stems
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.reader import pick, rank_sentences

FOLLOWUPS = (
    "That's helpful! Could you also tell me what else I should consider about my {topic}?",
    "Thanks for that information. I'm also curious how my {topic} changes your advice.",
    "That makes sense. What about practical next steps, given my {topic}?",
    "Good to know. Is there anything else I should keep in mind regarding my {topic}?",
)


def _pick(key: str, n: int) -> int:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "little") % n


@handles("amemgym_user_followup")
def user_followup(fields: dict[str, Any]) -> str:
    """Fields: initial_query, round, schema_types (names only)."""
    types = list(fields["schema_types"]) or ["situation"]
    key = f"{fields['initial_query']}|{fields['round']}"
    topic = types[_pick(key + "|type", len(types))].replace("_", " ")
    return FOLLOWUPS[_pick(key, len(FOLLOWUPS))].format(topic=topic)


#: Share of the message's idf mass a remembered sentence must cover to be brought up.
RECALL_COVERAGE = 0.15
_SPEAKER = re.compile(r"^(?:USER INPUT|ASSISTANT RESPONSE|user|assistant)\s*:\s*", re.IGNORECASE)
_SECOND_PERSON = (
    (re.compile(r"\bI'm\b|\bI am\b", re.IGNORECASE), "you're"),
    (re.compile(r"\bI'd\b", re.IGNORECASE), "you'd"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "your"),
    (re.compile(r"\bme\b", re.IGNORECASE), "you"),
    (re.compile(r"\bI\b"), "you"),
)


def _without_time(text: str) -> str:
    """A message without the session's "[Current Time: ...]" line (it is no topic)."""
    text = _SPEAKER.sub("", text.strip())
    return text.partition("\n")[2] if text.startswith("[Current Time:") else text


def _to_second_person(sentence: str) -> str:
    for pattern, replacement in _SECOND_PERSON:
        sentence = pattern.sub(replacement, sentence)
    return sentence


@handles("interactive_act")
def act(fields: dict[str, Any]) -> str:
    """Fields: message, memories (texts shown). Acknowledge the message's topic and bring up the
    remembered user statement that best matches it (in the second person), as an assistant with
    a memory would; nothing when no memory matches well enough."""
    message = _without_time(fields["message"])
    topic = list(dict.fromkeys(content_words(message)))[:4]
    about = ", ".join(topic) if topic else "your question"
    reply = f"Thanks for sharing. Here are some suggestions about {about}."
    said = set(sentences(message))
    candidates = [
        sentence
        for text in fields.get("memories") or []
        if not _SPEAKER.match(text)
        or not text.lower().startswith(("assistant", "assistant response"))
        for sentence in sentences(_without_time(text))
        if sentence not in said and not sentence.endswith("?")
    ]
    best = pick(rank_sentences(message, candidates))
    if best is not None and best[0] >= RECALL_COVERAGE:
        reply += f" From what I remember, {_to_second_person(candidates[best[1]])}"
    return reply


def _texts(context: list[Any]) -> list[str]:
    return [c["text"] if isinstance(c, dict) else str(c) for c in context]


@handles("amemgym_choice")
def choice(fields: dict[str, Any]) -> str:
    """Fields: options (shown order), context (texts, oldest first). Reply ```json {"answer": n}```.

    Each option is scored by the context text that covers most of its words; among equal
    coverage the later text wins (newer statements supersede older ones), then the first option.
    """
    bags = [set(stems(text)) for text in _texts(fields["context"])]
    best, best_key = 1, (-1.0, -1)
    for number, option in enumerate(fields["options"], start=1):
        words = set(stems(option))
        key = (0.0, -1)
        for position, bag in enumerate(bags):
            share = len(words & bag) / len(words) if words else 0.0
            if share > 0 and (share, position) > key:
                key = (share, position)
        if key > best_key:
            best, best_key = number, key
    return "```json\n" + json.dumps({"answer": best}) + "\n```"


@handles("amemgym_recall")
def recall(fields: dict[str, Any]) -> str:
    """Fields: schema {type: [choices]}, context (texts, oldest first). Latest mention wins."""
    texts = _texts(fields["context"])
    bags = [set(stems(text)) for text in texts]
    out: dict[str, str] = {}
    for info_type, choices in fields["schema"].items():
        latest, picked = -1, None
        for value in choices:
            words = set(stems(str(value)))
            if not words:
                continue
            for position, bag in enumerate(bags):
                if words <= bag and position >= latest:
                    latest, picked = position, value
        if picked is not None:
            out[info_type] = picked
    return "```json\n" + json.dumps(out, ensure_ascii=False) + "\n```"
