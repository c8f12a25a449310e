"""Context windows: whether a request fits its role's model, and cutting its oldest history.

A role's window is ``models.<role>.context_window``, else the shipped table's value for its model
(``data/model_prices.yaml``); only the openai backend has one (the offline heuristic and a local
embedder have no limit). A request fits when its prompt tokens plus the role's ``max_tokens`` are
at most the window, since OpenAI and vLLM refuse a request whose prompt and completion budget
exceed it.

Prompt tokens are counted before the call, with OpenAI's ``o200k_base`` BPE (``bpe-openai``
through :mod:`mnemoflow.llm.bpe`, no download) plus the chat format's 3 tokens per message and 3
for the reply: exact for the GPT-4o / 4.1 / o-series / GPT-5 families, an estimate for other
tokenizers (Qwen, Claude, Gemini count differently, typically within 10-20 % for English). The
ledger's own ``tokens_in`` is what the endpoint reports; the offline backend counts with
``lexical.count_tokens``, as its ledger does.

``overflow: truncate_oldest`` drops history messages -- those after the leading system
message(s) and before the prompt -- oldest first, until the request fits; a memory that a caller
rendered *into* the system prompt or the prompt text (RAG / AWI agents, the static QA readers) is
one message and is not cut here: those readers budget their own context (docs/gateway.md).
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, TypeVar

from mnemoflow import lexical
from mnemoflow.llm.bpe import tokenizer
from mnemoflow.llm.types import ChatRequest, ContextOverflow, EndpointSpec, ItemOverflow
from mnemoflow.prices import context_window

T = TypeVar("T")
R = TypeVar("R")

#: Tokens the chat format adds per message and before the reply (OpenAI's published count).
PER_MESSAGE = 3
REPLY_PRIMING = 3

#: The item (question, user, ...) whose requests are being built, for errors and the ledger.
_ITEM: contextvars.ContextVar[str] = contextvars.ContextVar("mnemoflow_item", default="")


@contextmanager
def item_scope(item: str) -> Iterator[None]:
    """Name the item the requests made inside the block belong to (an asyncio task's own)."""
    token = _ITEM.set(str(item))
    try:
        yield
    finally:
        _ITEM.reset(token)


def current_item() -> str:
    return _ITEM.get()


def scoped(
    worker: Callable[[T], Awaitable[R]], label: Callable[[T], str]
) -> Callable[[T], Awaitable[R]]:
    """``worker`` run inside :func:`item_scope` of ``label(item)``."""

    async def run(item: T) -> R:
        with item_scope(label(item)):
            return await worker(item)

    return run


def count_text(text: str, backend: str) -> int:
    """Tokens of ``text`` as this module counts them for ``backend``."""
    if not text:
        return 0
    if backend == "openai":
        return _bpe_count(text)
    return lexical.count_tokens(text)


@lru_cache(maxsize=64)
def _bpe_count(text: str) -> int:
    """o200k tokens of ``text``, kept for a few texts: a prompt is often counted twice in a row
    (whether it fits, then what it sends)."""
    return tokenizer("o200k_base").count(text)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else str(content or "")


def message_tokens(message: dict[str, Any], backend: str) -> int:
    return count_text(_content(message), backend) + PER_MESSAGE


def prompt_tokens(messages: list[dict[str, Any]], backend: str) -> int:
    """The prompt's tokens: every message's content plus the chat format's overhead."""
    return sum(message_tokens(m, backend) for m in messages) + REPLY_PRIMING


def window_of(spec: EndpointSpec) -> int | None:
    """The role's context window: its own setting, else the shipped table's for its model."""
    if spec.backend != "openai":
        return None
    return spec.context_window or context_window(spec.model)


def fits(
    request: ChatRequest, spec: EndpointSpec, prompt: int | None = None
) -> tuple[int, int | None]:
    """(tokens the request asks for: prompt + ``max_tokens``, the role's window or ``None``).

    It fits when the window is ``None`` or the first is at most the second. ``prompt``: the
    request's :func:`prompt_tokens` when the caller has counted them already.
    """
    if prompt is None:
        prompt = prompt_tokens(request.messages, spec.backend)
    return prompt + spec.max_tokens, window_of(spec)


def _surely_fits(messages: list[dict[str, Any]], spec: EndpointSpec, window: int) -> bool:
    """A BPE token is at least one UTF-8 byte: a prompt whose bytes fit needs no tokenizing
    (AMemGym's native agent would otherwise re-tokenize its whole history at every turn)."""
    size = sum(len(_content(m).encode("utf-8")) + PER_MESSAGE for m in messages)
    return spec.backend == "openai" and size + REPLY_PRIMING + spec.max_tokens <= window


def fit(request: ChatRequest, spec: EndpointSpec, keep_last: int = 1) -> tuple[ChatRequest, int]:
    """``request`` as it may be sent, and how many history messages were dropped from it.

    A request that fits is returned unchanged. Otherwise, by the role's ``overflow`` (else the
    request's own default, else ``fail``): ``fail`` raises :class:`ItemOverflow` naming the
    role, item and sizes (the gateway fails that item's call; the run goes on); ``abort`` raises
    :class:`ContextOverflow` (the job stops); ``truncate_oldest`` drops the oldest messages
    between the leading system message(s) and the last ``keep_last`` ones until it fits, and
    raises :class:`ItemOverflow` when even none of them left does not.
    """
    window = window_of(spec)
    if window is None or _surely_fits(request.messages, spec, window):
        return request, 0
    messages = request.messages
    sizes = [message_tokens(m, spec.backend) for m in messages]
    needed = sum(sizes) + REPLY_PRIMING + spec.max_tokens
    if needed <= window:
        return request, 0
    mode = spec.overflow or request.overflow or "fail"
    item = current_item() or "an item"
    where = f"models.{spec.role} ({spec.model}), task {request.task}, {item}"
    sizes_text = (
        f"prompt {needed - spec.max_tokens} + max_tokens {spec.max_tokens} = {needed} tokens "
        f"> context_window {window}"
    )
    if mode in ("fail", "abort"):
        error = ContextOverflow if mode == "abort" else ItemOverflow
        raise error(
            f"{where}: {sizes_text}; not sent (models.{spec.role}.overflow: {mode}; "
            "truncate_oldest drops the oldest history)"
        )
    lead = 0
    while lead < len(messages) - keep_last and messages[lead].get("role") == "system":
        lead += 1
    history = range(lead, len(messages) - keep_last)
    dropped = 0
    for index in history:
        if needed <= window:
            break
        needed -= sizes[index]
        dropped += 1
    if needed > window:
        raise ItemOverflow(
            f"{where}: {sizes_text}, and {needed} with all {len(history)} history messages "
            "dropped; not sent (a smaller max_tokens or a larger context_window may fit)"
        )
    kept = [*messages[:lead], *messages[lead + dropped :]]
    return dataclasses.replace(request, messages=kept), dropped
