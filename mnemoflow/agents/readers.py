"""Readers turn a question and the memory items retrieved for it into one ``agent`` request.

A reader decides the prompt a real model reads and the structured fields the offline reader reads.
Benchmarks with official answer prompts register their own reader; ``generic`` serves the synthetic
benchmark and any benchmark without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import MemoryItem

Reader = Callable[[dict[str, Any], list[MemoryItem]], ChatRequest]
READERS: dict[str, Reader] = {}

PROMPT_VERSION = "generic-v1"

SYSTEM = (
    "You are a helpful assistant with a memory of earlier conversations with this user. "
    "Answer the user's question from the memory excerpts. Newer information supersedes older "
    "information. If the excerpts do not contain the answer, say you don't know."
)


def register_reader(name: str) -> Callable[[Reader], Reader]:
    def decorator(fn: Reader) -> Reader:
        READERS[name] = fn
        return fn

    return decorator


def get_reader(name: str) -> Reader:
    if name not in READERS:
        raise ValueError(f"unknown reader {name!r}; available: {sorted(READERS)}")
    return READERS[name]


def chronological(items: list[MemoryItem]) -> list[MemoryItem]:
    """Items sorted by their conversation time (stable: equal times keep retrieval order)."""
    return sorted(items, key=lambda item: item.time or "")


@register_reader("generic")
def generic(question: dict[str, Any], items: list[MemoryItem]) -> ChatRequest:
    """Context excerpts in time order, then the question (with options when it has them)."""
    ordered = chronological(items)
    lines = [f"[{item.time}] {item.text}" if item.time else item.text for item in ordered]
    context = "\n".join(lines) if lines else "(no memory)"
    options = list(question.get("options", [])) if question.get("use_options") else []
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
