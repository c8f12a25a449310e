"""A verbose judge for the test server: a verdict written the way real judge models write one.

:func:`verbose` wraps a verdict ("yes" / "no", or "CORRECT" / "WRONG") in one of several replies
chosen by the request (so one run sees them all): misleading first words ("No doubt about it,
yes"), echoes of the instructions ("Yes or no: no"), negation ("it is not correct"), markdown,
trailing explanations. One in :data:`AMBIGUOUS_EVERY` replies states both verdicts, which no
reader may guess: the gateway re-asks it, and the re-ask (its follow-up asks for the label alone)
gets the bare label. A run scripted with it must give the verdicts of a run whose judge answers
with the bare label (``bench/faults.py``, ``tests/test_judge_faults.py``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mnemoflow.testing.openai_server import original_body

#: Every how many requests (by their digest) the first reply states both verdicts.
AMBIGUOUS_EVERY = 7

_YES_NO = {
    "yes": [
        "No doubt about it, yes: the response matches.",
        "The response contains the correct answer; no detail is missing.\n\n**Answer: Yes**",
        "Yes or no: yes. The response gives the same information as the correct answer.",
        "It might look incomplete at first, but yes, it contains the required information.",
        "There is no contradiction with the correct answer. Final answer: yes",
        "Yes.\n\nThe response is equivalent to the correct answer, just worded differently.",
    ],
    "no": [
        "Yes or no: no. The response names something other than the correct answer.",
        "No doubt the response is fluent, but it does not contain the correct answer. No.",
        "The response gives no answer that matches. So the answer is no.",
        "**No**\n\nThe response only contains a subset of the required information.",
        "Although the response mentions a related detail, no: it misses the correct answer.",
        "Final answer: no\n\nYes, it is well written, but the key fact differs.",
    ],
}
_CORRECT_WRONG = {
    "CORRECT": [
        "There is nothing wrong with the generated answer; it refers to the same thing. CORRECT",
        "At first glance this looks wrong, but it is actually correct.",
        "The generated answer isn't identical in wording, yet it matches the gold.\n\n**CORRECT**",
        '{"reasoning": "Same topic as the gold answer.", "label": "CORRECT"}',
    ],
    "WRONG": [
        "The generated answer names something else, so it is not correct.",
        "The answer isn't correct, since it contradicts the gold answer.",
        "It might seem correct because it is on topic, but it is not. WRONG",
        '```json\n{"label": "WRONG"}\n```\nThe generated answer differs from the gold answer.',
    ],
}
_BOTH = {
    "yes": "Yes and no: part of it matches.",
    "no": "Yes and no: part of it matches.",
    "CORRECT": "The generated answer is partly CORRECT and partly WRONG.",
    "WRONG": "The generated answer is partly CORRECT and partly WRONG.",
}


def is_reask(body: dict[str, Any]) -> bool:
    """Whether ``body`` is a gateway re-ask (its original prompt plus a follow-up)."""
    return original_body(body) is not body


def verbose(verdict: str, body: dict[str, Any]) -> str:
    """A verbose reply stating ``verdict`` for this request; the bare label on a re-ask."""
    if is_reask(body):
        return verdict
    prompt = json.dumps(original_body(body).get("messages"), sort_keys=True)
    pick = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)
    if pick % AMBIGUOUS_EVERY == 0:
        return _BOTH[verdict]
    replies = (_YES_NO if verdict in _YES_NO else _CORRECT_WRONG)[verdict]
    return replies[pick % len(replies)]
