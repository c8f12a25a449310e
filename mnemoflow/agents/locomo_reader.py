"""LoCoMo answer prompts with the intent of ``task_eval/evaluate_gpts.py`` (snap-research/locomo).

- The answer is a short phrase, with exact words from the conversation where possible.
- Category 2 (temporal) appends "Use DATE of CONVERSATION to answer with an approximate date."
- Category 5 (adversarial) is asked as a two-option choice between "Not mentioned in the
  conversation" and the adversarial answer; the official code draws the order with an unseeded
  ``random.random()``, here it is drawn from (seed, question id) so reruns ask the same prompt. A
  reply that is just the option letter ("a", "(b)") is mapped back to the option's text by
  :func:`resolve_choice`, as the official ``get_cat_5_answer`` does; any other reply is kept as is.
- Modes: ``long_context`` (the whole conversation, "DATE: ... CONVERSATION: ..." per session,
  speakers' turns as ``Name said, "text"``; over budget, the newest turns are kept, as the official
  reader fills its context from the last session backwards), ``oracle`` (the evidence turns),
  ``retrieval`` (a memory system's items in rank order, each as ``date: text``, as the official
  RAG reader shows them).

Builders are pure: (question row, context items, options) -> ChatRequest with role "agent", task
"answer" and fields {question, context: [{text, time}], options} for the offline reader. A
passage's text is the line the model reads (``Name said, "text"``): LoCoMo questions name the
speaker ("What did Caroline research?"), so the speaker belongs to the evidence.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.agents.longmemeval_reader import with_source_turns
from mnemoflow.agents.reader_options import ReaderOptions, check_budget
from mnemoflow.data.locomo import category_of
from mnemoflow.data.tables import as_list
from mnemoflow.errors import ConfigError
from mnemoflow.llm.types import ChatRequest, UnparseableReply
from mnemoflow.memory.tokens import count_tokens

PROMPT_VERSION = "locomo-reader-v1"
MODES = ("long_context", "oracle", "retrieval")
NOT_MENTIONED = "Not mentioned in the conversation"

_QA = (
    "Based on the above context, write an answer in the form of a short phrase for the following "
    "question. Answer with exact words from the context whenever possible.\n\n"
    "Question: {question} Short answer:"
)
_QA_CHOICE = (
    "Based on the above context, answer the following question.\n\n"
    "Question: {question} Short answer:"
)
_DATE_HINT = " Use DATE of CONVERSATION to answer with an approximate date."
_START = (
    "Below is a conversation between two people: {a} and {b}. The conversation takes place over "
    "multiple days and the date of each conversation is written at the beginning of the "
    "conversation.\n\n"
)


@dataclass(frozen=True)
class LocomoReadingOptions(ReaderOptions):
    """How the reader sees the conversation (config ``reader:`` of a LoCoMo benchmark)."""

    mode: str = "retrieval"
    budget_tokens: int = 120_000
    seed: int = 0  # category-5 option order

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"config reader.mode: one of {list(MODES)}, got {self.mode!r}")
        check_budget(self.budget_tokens)


def _meta(question: dict[str, Any]) -> dict[str, Any]:
    raw = question.get("meta")
    if isinstance(raw, dict):
        return raw
    return json.loads(raw) if raw else {}


def choice_options(question: dict[str, Any], seed: int) -> list[str]:
    """The two options of a category-5 question, in an order drawn from (seed, question id)."""
    adversarial = _meta(question).get("adversarial_answer") or question.get("answer") or ""
    rng = random.Random(f"{seed}:{question['question_id']}")
    pair = [NOT_MENTIONED, str(adversarial)]
    return pair if rng.random() < 0.5 else pair[::-1]


def question_text(question: dict[str, Any], seed: int = 0) -> tuple[str, list[str]]:
    """The question as asked (with the date hint or the two options) and the options shown."""
    category = category_of(question["question_type"], _meta(question))
    text = str(question["question"])
    if category == 2:
        return text + _DATE_HINT, []
    if category == 5:
        options = choice_options(question, seed)
        return text + f" Select the correct answer: (a) {options[0]} (b) {options[1]}. ", options
    return text, []


def resolve_choice(reply: str, options: list[str]) -> str:
    """Map a bare option letter back to its text (the official rule); other replies unchanged."""
    if not options:
        return reply
    text = reply.strip().lower()
    if len(text) == 1:
        return options[0] if "a" in text else options[1]
    if len(text) == 3:
        return options[0] if "(a)" in text else options[1]
    return reply


def choice_parser(options: list[str]):
    """The gateway parser of a LoCoMo answer: any non-empty reply, letters resolved officially.

    The official rule accepts free text as an answer, so only an empty reply is re-asked.
    """

    def parse(text: str) -> str:
        if not text or not text.strip():
            raise UnparseableReply("empty reply")
        return resolve_choice(text, options)

    return parse


def _line(record: dict[str, Any]) -> str:
    return f'{record["speaker"]} said, "{str(record["content"]).strip()}"'


def conversation_context(turns: pd.DataFrame, budget_tokens: int) -> tuple[str, list[str]]:
    """The long-context conversation, newest turns first into the budget; (text, turn ids kept)."""
    text, kept = _budgeted_conversation(turns, budget_tokens)
    return text, [r["turn_id"] for r in kept]


def _budgeted_conversation(
    turns: pd.DataFrame, budget_tokens: int
) -> tuple[str, list[dict[str, Any]]]:
    """(prompt text, the turn records it holds): one cut serves the prompt, the offline reader's
    fields and the diagnosis, so none of them sees a turn the others do not."""
    records = turns.sort_values(["session_index", "turn_index"]).to_dict("records")
    speakers = list(dict.fromkeys(r["speaker"] for r in records))
    start = _START.format(
        a=speakers[0] if speakers else "", b=speakers[1] if len(speakers) > 1 else ""
    )
    used = count_tokens(start)
    kept: list[dict[str, Any]] = []
    for record in reversed(records):
        cost = count_tokens(_line(record)) + 1
        if used + cost > budget_tokens:
            break
        kept.append(record)
        used += cost
    kept.reverse()
    parts, current = [], None
    for record in kept:
        if record["session_id"] != current:
            current = record["session_id"]
            parts.append(f"\nDATE: {record['session_time']}\nCONVERSATION:\n")
        parts.append(_line(record) + "\n")
    return start + "".join(parts), kept


def build_request(
    question: dict[str, Any],
    items: list[Any],
    options: LocomoReadingOptions,
    turns: pd.DataFrame | None = None,
) -> ChatRequest:
    """The answer request for one LoCoMo question.

    ``long_context`` reads ``turns`` (the conversation's rows of the sessions table); ``oracle``
    reads the evidence turns of ``turns``; ``retrieval`` reads ``items`` (MemoryItems or dicts
    with text, time, source_ids). Items that name turns of ``turns`` are shown as those turns.
    """
    asked, choices = question_text(question, options.seed)
    template = _QA_CHOICE if choices else _QA
    if options.mode == "long_context":
        if turns is None:
            raise ValueError("locomo reader: long_context needs the conversation's turns")
        context, kept = _budgeted_conversation(turns, options.budget_tokens)
        passages = [{"text": _line(r), "time": str(r["session_time"])} for r in kept]
    else:
        if options.mode == "oracle":
            if turns is None:
                raise ValueError("locomo reader: oracle needs the conversation's turns")
            evidence = set(as_list(question.get("evidence_ids")))
            selected = turns[turns["turn_id"].isin(evidence)]
            selected = selected.sort_values(["session_index", "turn_index"]).to_dict("records")
            entries = [(str(r["session_time"]), _line(r)) for r in selected]
        else:
            entries = _item_entries(items, turns)
        context = "\n".join(f"{time}: {line}" for time, line in entries)
        passages = [{"text": line, "time": time} for time, line in entries]
    prompt = context + "\n\n" + template.format(question=asked)
    fields: dict[str, Any] = {"question": str(question["question"]), "context": passages}
    if choices:
        fields["options"] = choices
    return ChatRequest(
        role="agent", task="answer", messages=[{"role": "user", "content": prompt}], fields=fields
    )


def _item_entries(items: list[Any], turns: pd.DataFrame | None) -> list[tuple[str, str]]:
    entries = []
    for get, _, records in with_source_turns(items, turns):
        if records is None:
            entries.append((str(get("time") or ""), str(get("text"))))
        else:
            entries.extend((str(record["session_time"]), _line(record)) for record in records)
    return entries
