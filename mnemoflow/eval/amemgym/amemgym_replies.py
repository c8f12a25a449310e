"""Parsers of AMemGym's two reply formats: a checkpoint answer and a state recall.

Both follow the reference's reading (``utils/json_utils.parse_json``): the first ```json fenced
block if there is one, else the whole reply, read with ``json.loads``. Where the reference then
guesses, these raise :class:`UnparseableReply` so that the gateway re-asks and, after the last
attempt, the answer is counted as a parse failure and scored wrong:

- the reference turns any unparseable checkpoint reply into a uniformly random option that is
  scored normally, and reads ``0`` or a negative number as an index from the end of the option
  list; here only an integer in ``1..n_options`` is an answer (a string number, a float, ``true``,
  ``0`` and negatives are not);
- a recall reply that is not a JSON object is ``{}`` in the reference (every type recalled wrong);
  here it is re-asked first. A missing type in an object that parsed is a wrong recall, as there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.llm.types import UnparseableReply

_FENCED = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def reply_json(text: str) -> Any:
    """The JSON value of a reply: its first ```json block, else the whole text."""
    match = _FENCED.search(text or "")
    body = match.group(1) if match else (text or "")
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise UnparseableReply(f"not JSON: {exc.msg}") from None


def parse_answer(text: str, n_options: int) -> int:
    """The 1-based option number of a checkpoint reply ``{"answer": int}``."""
    value = reply_json(text)
    if not isinstance(value, dict) or "answer" not in value:
        raise UnparseableReply('no "answer" key')
    answer = value["answer"]
    if not isinstance(answer, int) or isinstance(answer, bool):
        raise UnparseableReply(f'"answer" must be an integer, got {answer!r}')
    if not 1 <= answer <= n_options:
        raise UnparseableReply(f'"answer" must be 1..{n_options}, got {answer}')
    return answer


def parse_recall(text: str) -> dict[str, str]:
    """The ``{info_type: choice}`` object of a recall reply (values as strings)."""
    value = reply_json(text)
    if not isinstance(value, dict):
        raise UnparseableReply(f"recall must be a JSON object, got {type(value).__name__}")
    return {
        str(key): value if isinstance(value, str) else json.dumps(value)
        for key, value in value.items()
    }
