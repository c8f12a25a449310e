"""Offline handlers of the interactive family (AMemGym): the state-revealing user, the assistant's
turn in a session, a multiple-choice pick and a state recall.

Honest heuristics that read only the request's structured fields, with the world knowledge the
environment's writer has too (:mod:`mnemoflow.amemgym_world`: which sentence states which value,
which advice suits which value) and nothing of the environment itself:

- the user continues with a templated follow-up about one of the schema's *type names* (which the
  reference shows it; never a value, and nothing repeated from the first query);
- the assistant *believes*, per type, the value of the latest statement in its context that is
  not its own (:func:`~mnemoflow.amemgym_world.belief`); in a session it acknowledges the values
  the message states ("Noted: your diet is vegetarian now") and otherwise brings up what it
  believes about the types the message is about, never an older value the message replaces;
- a multiple-choice pick decodes each shown option into the values its advice implies and picks
  the option most consistent with the belief (ties: the first shown, so an assistant that knows
  nothing is at chance);
- a recall reports the belief for the schema's types and leaves out a type it holds no belief
  about (a missing type is a wrong recall, not a guess). Recall and pick read the same belief, so
  the diagnosis and the accuracy agree.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mnemoflow import amemgym_world as world
from mnemoflow.lexical import content_words, stems
from mnemoflow.llm.offline import handles

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


def _without_time(text: str) -> str:
    """A message without the session's "[Current Time: ...]" line (it is no topic)."""
    text = text.strip()
    return text.partition("\n")[2] if text.startswith("[Current Time:") else text


def _said(pairs: dict[str, str], tense: str) -> str:
    return ", and ".join(
        f"your {world.label(name)} is {value}{tense}" for name, value in pairs.items()
    )


@handles("interactive_act", reads=(world.TOPICS,))
def act(fields: dict[str, Any]) -> str:
    """Fields: message, context (what the assistant is shown: {role, text}, oldest first).
    Acknowledge the message's topic and the values it states; otherwise bring up the believed
    values of the types the message is about, as an assistant with a memory would."""
    message = _without_time(fields["message"])
    topic = list(dict.fromkeys(content_words(message)))[:4]
    about = ", ".join(topic) if topic else "your question"
    reply = f"Thanks for sharing. Here are some suggestions about {about}."
    told = world.belief([{"role": "user", "text": message}]).current
    if told:
        return reply + f" Noted: {_said(told, ' now')}."
    asked = set(stems(message))
    believed = world.belief(fields["context"]).current
    related = {name: value for name, value in believed.items() if world.cues(name) & asked}
    if related:
        reply += f" From what I remember, {_said(related, '')}."
    return reply


@handles("amemgym_choice", reads=(world.TOPICS,))
def choice(fields: dict[str, Any]) -> str:
    """Fields: options (shown order), context (oldest first). Reply ```json {"answer": n}```:
    the option whose implied values agree most with the belief (ties: the first)."""
    believed = world.belief(fields["context"])
    scores = [world.consistency(option, believed) for option in fields["options"]]
    best = scores.index(max(scores)) + 1 if scores else 1
    return "```json\n" + json.dumps({"answer": best}) + "\n```"


@handles("amemgym_recall", reads=(world.TOPICS,))
def recall(fields: dict[str, Any]) -> str:
    """Fields: schema {type: [choices]}, context (oldest first). The belief per schema type."""
    believed = world.belief(fields["context"], fields["schema"]).current
    out = {name: believed[name] for name in fields["schema"] if name in believed}
    return "```json\n" + json.dumps(out, ensure_ascii=False) + "\n```"
