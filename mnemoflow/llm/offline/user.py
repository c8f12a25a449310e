"""Offline simulated user: templated replies driven by the structured fields of the request."""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.lexical import sentences
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.judge import overlap_recall


@handles("user_feedback")
def user_feedback(fields: dict[str, Any]) -> str:
    """Fields: question, response, reference. Praise a response that matches, else correct it."""
    if overlap_recall(str(fields["reference"]), fields["response"] or "") >= 0.5:
        return "Thanks, that is right."
    return f"That is not right. The answer I was looking for is: {fields['reference']}"


@handles("user_reveal")
def user_reveal(fields: dict[str, Any]) -> str:
    """Fields: statements (list of str): the facts the user shares in this turn."""
    return " ".join(fields["statements"])


#: Share of the reference the answer must cover for the offline simulated user to like it.
LIKE_OVERLAP = 0.5
#: A correction quotes at most this many words of the reference.
CORRECTION_WORDS = 60


def overlap(reference: str, response: str, lang: str) -> float:
    """Token overlap recall; Chinese by characters (no word boundaries to count)."""
    if lang == "zh":
        gold = [c for c in reference if not c.isspace()]
        said = set(response)
        return sum(c in said for c in gold) / len(gold) if gold else 0.0
    return overlap_recall(reference, response)


def correction(reference: str, lang: str) -> str:
    first = (sentences(reference) or [reference])[0]
    quoted = " ".join(first.split()[:CORRECTION_WORDS]) if lang != "zh" else first[:200]
    if lang == "zh":
        return f"不对。{quoted}"
    return f"That is not right. {quoted}"


@handles("user_feedback_json")
def user_feedback_json(fields: dict[str, Any]) -> str:
    """Fields: response, reference, lang. Grades the answer by token overlap with the privileged
    reference: a match is liked and ends the dialogue; a miss is disliked and corrected with the
    reference's first sentence. No reference (criteria-only datasets): no opinion, the user ends."""
    reference, lang = str(fields["reference"] or ""), str(fields.get("lang") or "en")
    if not reference.strip():
        reply = {
            "reasoning": "No reference to compare with.",
            "implicit_action": "none",
            "behavior": "end_conversation",
            "response": None,
        }
        return json.dumps(reply, ensure_ascii=False)
    covered = overlap(reference, fields["response"] or "", lang)
    liked = covered >= LIKE_OVERLAP
    reply = {
        "reasoning": f"The answer covers {covered:.2f} of the reference.",
        "implicit_action": "like" if liked else "dislike",
        "behavior": "end_conversation" if liked else "continue_conversation",
        "response": None if liked else correction(reference, lang),
    }
    return json.dumps(reply, ensure_ascii=False)
