"""Offline simulated user: templated replies driven by the structured fields of the request."""

from __future__ import annotations

from typing import Any

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
