"""Offline handlers of the interactive family (AMemGym): the state-revealing user, the assistant's
turn in a session, a multiple-choice pick and a state recall.

Honest heuristics that read only the request's structured fields:

- the user continues with a templated follow-up about one of the schema's *type names* (which the
  reference shows it; never a value, and nothing repeated from the first query);
- the assistant acknowledges the message and names its main topic words (it gives no state);
- a multiple-choice pick is the option whose words the context covers best (ties: the first);
- a recall picks, per info type, the choice mentioned latest in the context, and leaves out a type
  the context never mentions (a missing type is a wrong recall, not a guess).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

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


@handles("interactive_act")
def act(fields: dict[str, Any]) -> str:
    """Fields: message (the user's last message). Acknowledge and name its topic words."""
    message = fields["message"]
    if message.startswith("[Current Time:"):  # the session's time prefix is no topic
        message = message.partition("\n")[2]
    topic = list(dict.fromkeys(content_words(message)))[:4]
    about = ", ".join(topic) if topic else "your question"
    return f"Thanks for sharing. Here are some suggestions about {about}, based on what you said."


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
