"""Readers turn a question and what memory returned for it into the agent's answer.

A reader decides the prompt a real model reads and the structured fields the offline reader reads.
Benchmarks with official answer prompts have their own reader (``locomo``, ``longmemeval``, with
their reading modes); ``generic`` serves the synthetic benchmark and any other. Config names a
reader per benchmark as ``reader: NAME`` or ``reader: {name: NAME, <options>}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.agents import locomo_reader, longmemeval_reader
from mnemoflow.errors import ConfigError
from mnemoflow.lexical import words
from mnemoflow.llm.gateway import require_text
from mnemoflow.llm.types import ChatRequest, Reply, UnparseableReply
from mnemoflow.memory.base import MemoryItem
from mnemoflow.memory.tokens import count_tokens

PROMPT_VERSION = "generic-v1"
READERS = ("generic", "locomo", "longmemeval")

SYSTEM = (
    "You are a helpful assistant with a memory of earlier conversations with this user. "
    "Answer the user's question from the memory excerpts. Newer information supersedes older "
    "information. If the excerpts do not contain the answer, say you don't know."
)


@dataclass
class Answer:
    """A reader's result: the stored response, the turn ids shown to the model, the final reply.

    ``ranked_ids`` is the memory's own ranking (source ids of the retrieved items in rank order, or
    an official retrieval log's ids): retrieval metrics need it, because ``shown_ids`` has been
    re-sorted by date, cut to top-k / a token budget and expanded to rounds by the reader.
    """

    response: str
    shown_ids: list[str]
    reply: Reply
    context_tokens: int
    ranked_ids: list[str]


def reader_config(raw: str | dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Split a ``reader:`` config value into (name, options), checking the name and options."""
    if raw is None:
        return "generic", {}
    if isinstance(raw, str):
        name, options = raw, {}
    else:
        options = dict(raw)
        name = options.pop("name", "generic")
    if name not in READERS:
        raise ConfigError(f"config reader: one of {list(READERS)}, got {name!r}")
    if name == "locomo":
        locomo_reader.LocomoReadingOptions.from_config(options)
    elif name == "longmemeval":
        longmemeval_reader.ReadingOptions.from_config(options)
    elif options:
        raise ConfigError(f"config reader: the generic reader takes no options, got {options}")
    return name, options


def chronological(items: list[MemoryItem]) -> list[MemoryItem]:
    """Items sorted by their conversation time (stable: equal times keep retrieval order)."""
    return sorted(items, key=lambda item: item.time or "")


def source_ids(items: list[MemoryItem]) -> list[str]:
    """Source ids of ``items`` in their order, each once (a memory's ranking, flattened)."""
    return list(dict.fromkeys(s for item in items for s in item.source_ids))


def generic_request(
    question: dict[str, Any], items: list[MemoryItem], use_options: bool = False
) -> ChatRequest:
    """Context excerpts in time order, then the question (with options when asked to show them)."""
    ordered = chronological(items)
    lines = [f"[{item.time}] {item.text}" if item.time else item.text for item in ordered]
    context = "\n".join(lines) if lines else "(no memory)"
    options = [str(o) for o in question.get("options", [])] if use_options else []
    prompt = f"Memory excerpts:\n{context}\n\nCurrent date: {question.get('question_time', '')}\n"
    prompt += f"Question: {question['question']}\n"
    if options:
        prompt += "Options:\n" + "\n".join(f"- {o}" for o in options) + "\nAnswer with one option."
    else:
        prompt += "Answer in a short phrase."
    return ChatRequest(
        role="agent",
        task="answer",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        fields={
            "question": question["question"],
            "context": [{"text": item.text, "time": item.time} for item in ordered],
            "options": options,
        },
    )


#: Replies that decline to answer; with options shown they are an answer, not a format error.
DECLINING = ("don't know", "do not know", "not mentioned", "cannot answer", "no information")


def option_parser(options: list[str]):
    """Parser for a reply to "Answer with one option": it must name exactly one option, or decline.

    A reply naming none or several options is unparseable, so the gateway re-asks; after the last
    attempt the raw reply is stored as the response (the judge grades it) and the ledger counts the
    failure. The parsed value is the reply text itself: the stored response is what the model said.
    """
    keys = [" ".join(words(option)) for option in options]

    def parse(text: str) -> str:
        require_text(text)
        said = f" {' '.join(words(text))} "
        if any(phrase in text.lower().replace("\u2019", "'") for phrase in DECLINING):
            return text
        named = {key for key in keys if key and f" {key} " in said}
        # "black cat" also contains the option "cat": the longer option is the one named
        inner = {k for k in named for o in named if k != o and f" {k} " in f" {o} "}
        named -= inner
        if len(named) != 1:
            raise UnparseableReply(f"names {len(named)} of {len(options)} options")
        return text

    return parse


def _tokens(request: ChatRequest) -> int:
    """The prompt's size in o200k tokens, the unit of the readers' budgets."""
    return sum(count_tokens(m["content"]) for m in request.messages)


def planned_requests(
    name: str,
    options: dict[str, Any],
    question: dict[str, Any],
    items: list[MemoryItem],
    turns: pd.DataFrame | None,
    use_options: bool = False,
    log_ids: list[str] | None = None,
) -> list[ChatRequest]:
    """The agent requests :func:`read` sends for one question, rendered by the same builders
    before any reply: one request, or with LongMemEval's ``con_separate`` one reading-note
    request per chunk and then the answer request over the chunks *without* their notes (the
    notes are replies, so that last prompt is an estimate). For ``mnemoflow plan``."""
    if name == "locomo":
        opts = locomo_reader.LocomoReadingOptions.from_config(options)
        return [locomo_reader.build_request(question, items, opts, turns)]
    if name == "longmemeval":
        opts = longmemeval_reader.ReadingOptions.from_config(options)
        if turns is None:
            raise ValueError("longmemeval reader: needs the episode's turns")
        chunks = longmemeval_reader.chunks_for(question, turns, opts, items=items, log_ids=log_ids)
        notes = (
            longmemeval_reader.note_requests(question, chunks)
            if opts.method == "con_separate" and chunks
            else []
        )
        return [*notes, longmemeval_reader.build_request(question, chunks, opts)]
    return [generic_request(question, items, use_options)]


async def read(
    name: str,
    options: dict[str, Any],
    question: dict[str, Any],
    items: list[MemoryItem],
    turns: pd.DataFrame | None,
    gateway: Any,
    use_options: bool = False,
    log_ids: list[str] | None = None,
) -> Answer:
    """Answer one question with the named reader (one or more ``agent`` calls).

    ``log_ids`` (LongMemEval retrieval mode) are an official retrieval log's ranked corpus ids,
    read instead of ``items``.
    """
    ranked = source_ids(items)
    if name == "locomo":
        opts = locomo_reader.LocomoReadingOptions.from_config(options)
        request = locomo_reader.build_request(question, items, opts, turns)
        choices = request.fields.get("options", [])
        reply = await gateway.chat(request, parse=locomo_reader.choice_parser(choices))
        response = reply.parsed if reply.parse_ok else reply.text
        if opts.mode == "long_context" and turns is not None:
            shown = locomo_reader.conversation_context(turns, opts.budget_tokens)[1]
        elif opts.mode == "oracle":
            shown = [str(e) for e in question.get("evidence_ids", [])]
        else:
            shown = source_ids(items)
        return Answer(response, shown, reply, _tokens(request), ranked)
    if name == "longmemeval":
        opts = longmemeval_reader.ReadingOptions.from_config(options)
        if turns is None:
            raise ValueError("longmemeval reader: needs the episode's turns")
        chunks = longmemeval_reader.chunks_for(question, turns, opts, items=items, log_ids=log_ids)
        if log_ids is not None:
            ranked = list(dict.fromkeys(log_ids))
        if opts.method == "con_separate" and chunks:
            notes = [
                await gateway.chat(r) for r in longmemeval_reader.note_requests(question, chunks)
            ]
            chunks = longmemeval_reader.with_notes(chunks, [n.text for n in notes])
        request = longmemeval_reader.build_request(question, chunks, opts)
        reply = await gateway.chat(request)
        shown = longmemeval_reader.context_ids(chunks)
        return Answer(reply.text, shown, reply, _tokens(request), ranked)
    request = generic_request(question, items, use_options)
    options = request.fields["options"]
    reply = await gateway.chat(request, parse=option_parser(options) if options else None)
    return Answer(reply.text, ranked, reply, _tokens(request), ranked)
