"""Self-evolving AWI [AMemGym Table 3]: after a period's checkpoint, the agent rewrites its memory
system's "Types of Information to Remember" section from the checkpoint's feedback.

Feedback, one item per checkpoint question (what the reference's ``collect_evolution_feedback``
gathers, with its bugs fixed):

- ``question_only``: the question and the memories the agent was shown for it;
- ``complete``: the question with its options lettered (A), (B), ... in the order the agent saw
  them, the letter of the option the agent actually chose (the reference indexes the letters with
  the 1-based answer and so names the next option, or none past the last; here answer 1 is (A)),
  or a note that the answer did not parse, and the memories.

One call of the ``agent`` role (as the reference, which evolves with the agent's model) with a
non-empty system prompt (the reference sends an empty one when not "guided"). The reply
``{"new_types": str, "changes": [str]}`` is parsed strictly (the gateway re-asks); a reply that
never parses keeps the old section, is counted in the memory's ``evolution_failures`` and
recorded, never guessed. The memory system holds the section and saves it in its snapshot.
"""

from __future__ import annotations

import json
import string
from typing import Any

import pyarrow as pa

from mnemoflow.llm.types import ChatRequest, UnparseableReply
from mnemoflow.memory.writer import loads_json

EVOLVE_TASK = "evolve-memory-types"
ROLE = "agent"
LETTERS = string.ascii_uppercase
NO_ANSWER = "no answer (the assistant's reply did not parse)"

#: One row per (user, period) of a system with ``evolve`` configured, beside the step's outputs.
EVOLUTION = pa.schema(
    [
        ("user_id", pa.string()),
        ("period", pa.int64()),
        ("variant", pa.string()),  # none | question_only | complete
        ("old_section", pa.string()),
        ("new_section", pa.string()),
        ("changed", pa.bool_()),
        ("changes", pa.list_(pa.string())),
        ("parse_ok", pa.bool_()),  # none: true (no call is made)
        ("attempts", pa.int64()),  # model calls, re-asks included (none: 0)
        ("raw_replies", pa.list_(pa.string())),
        ("feedback", pa.string()),  # the feedback items as JSON
        ("model", pa.string()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
    ]
)

EVOLVE_SYSTEM = """You maintain the instructions of an assistant that extracts memories about a \
user from conversations. You rewrite one part of them: the "Types of Information to Remember" \
section, the list of information types the extractor looks for.

You get the current section and feedback from a checkpoint where the assistant answered the \
user's questions using the memories it had extracted. Make the types more specific and \
actionable: when the memories lack what a question needed, add or sharpen the types of \
information that would have answered it. Each type says clearly what to extract and store. Keep \
the format: a numbered list, one type per line, "N. Name: description".

Reply with JSON only: {"new_types": "<the whole rewritten section>", "changes": ["<short note \
of one change>", ...]}"""

DESCRIPTIONS = {
    "question_only": "each checkpoint question and the memories the assistant was shown for it",
    "complete": (
        "each checkpoint question with its options, the option the assistant chose, and the "
        "memories the assistant was shown for it"
    ),
}


def lettered_question(question: str, options: list[str]) -> str:
    """ "Question: q;" then one "(A) option;" line per option, in the order shown."""
    lines = [f"Question: {question.strip()}"]
    lines += [f"({LETTERS[i]}) {text.strip()}" for i, text in enumerate(options)]
    return ";\n".join(lines) + ";"


def chosen_letter(answer: int | None, n_options: int) -> str | None:
    """The letter of 1-based option ``answer`` (1 -> "A"); None when there is no answer."""
    if answer is None:
        return None
    if not 1 <= answer <= min(n_options, len(LETTERS)):
        raise ValueError(f"answer {answer} is not one of options 1..{n_options}")
    return LETTERS[answer - 1]


def feedback_item(
    variant: str, question: str, options: list[str], answer: int | None, memories: str
) -> dict[str, Any]:
    """One checkpoint question's feedback as the model reads it."""
    if variant == "question_only":
        return {"question": f"Question: {question.strip()};", "memories_shown": memories}
    if variant == "complete":
        letter = chosen_letter(answer, len(options))
        return {
            "question": lettered_question(question, options),
            "assistant_choice": letter if letter is not None else NO_ANSWER,
            "memories_shown": memories,
        }
    raise ValueError(f"no feedback for evolve variant {variant!r}")


def evolution_request(
    memory_types: str, variant: str, feedback: list[dict[str, Any]], fields: list[dict[str, Any]]
) -> ChatRequest:
    """The rewrite call; ``fields`` are the feedback's structured parts for the offline model."""
    user = (
        'Current "Types of Information to Remember" section:\n\n'
        f"{memory_types}\n\n"
        f"Feedback from the latest checkpoint ({DESCRIPTIONS[variant]}):\n"
        f"{json.dumps(feedback, indent=2, ensure_ascii=False)}\n\n"
        "Rewrite the section so that the memories hold what these questions need. Return the "
        "whole section, in the same format."
    )
    return ChatRequest(
        role=ROLE,
        task=EVOLVE_TASK,
        messages=[{"role": "system", "content": EVOLVE_SYSTEM}, {"role": "user", "content": user}],
        fields={"variant": variant, "memory_types": memory_types, "feedback": fields},
    )


def parse_evolution(text: str) -> tuple[str, list[str]]:
    """``{"new_types": non-empty str, "changes": [str]}`` or UnparseableReply (re-asked)."""
    data = loads_json(text)
    if not isinstance(data, dict):
        raise UnparseableReply("the reply holds no JSON object")
    new_types, changes = data.get("new_types"), data.get("changes")
    if not isinstance(new_types, str) or not new_types.strip():
        raise UnparseableReply('"new_types" must be a non-empty string')
    if not isinstance(changes, list) or not all(isinstance(c, str) for c in changes):
        raise UnparseableReply('"changes" must be a list of strings')
    return new_types.strip("\n"), changes


async def evolve(
    memory: Any,
    gateway: Any,
    user_id: str,
    period: int,
    variant: str,
    questions: list[dict[str, Any]],
) -> dict[str, Any]:
    """Rewrite ``memory``'s types section from one checkpoint; the EVOLUTION row.

    ``questions``: per checkpoint question, ``question``, ``options`` (as shown), ``answer``
    (1-based, None if the reply did not parse) and ``memories`` (the memory lines shown).
    ``none`` makes no call and records the unchanged section.
    """
    old = memory.memory_types
    row = {
        "user_id": user_id,
        "period": period,
        "variant": variant,
        "old_section": old,
        "new_section": old,
        "changed": False,
        "changes": [],
        "parse_ok": True,
        "attempts": 0,
        "raw_replies": [],
        "feedback": "[]",
        "model": None,
        "tokens_in": 0,
        "tokens_out": 0,
    }
    if variant == "none":
        return row
    feedback = [
        feedback_item(variant, q["question"], q["options"], q["answer"], q["memories"])
        for q in questions
    ]
    fields = []
    for q in questions:
        field = {"question": q["question"], "memories": q["memories"]}
        if variant == "complete":
            field["options"] = list(q["options"])
            field["chosen"] = chosen_letter(q["answer"], len(q["options"]))
        fields.append(field)
    reply = await gateway.chat(
        evolution_request(old, variant, feedback, fields), parse=parse_evolution
    )
    memory.evolutions += 1
    row |= {
        "feedback": json.dumps(feedback, ensure_ascii=False),
        "parse_ok": bool(reply.parse_ok),
        "attempts": int(reply.attempts),
        "raw_replies": list(reply.raw_replies or [reply.text]),
        "model": reply.model,
        "tokens_in": int(reply.tokens_in),
        "tokens_out": int(reply.tokens_out),
    }
    if not reply.parse_ok:
        memory.evolution_failures += 1
        return row
    new, changes = reply.parsed
    memory.set_memory_types(new)
    return row | {"new_section": new, "changed": new != old, "changes": list(changes)}
