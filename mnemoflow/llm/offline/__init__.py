"""The embedded offline backend: a deterministic, in-process heuristic model.

It reads a request's ``task`` tag and structured ``fields`` (never the rendered prompt) and answers
as an honest heuristic, recorded as ``offline-heuristic`` everywhere: an extractive reader, a
token-overlap judge, a templated user, a sentence-level fact writer, and hashed bag-of-words
embeddings. Its scores measure what a memory system put in front of the reader, not an LLM.

Task handlers live in one module per family (reader, judge, user, writer) and register here by
task name; an unknown task is an error, never a made-up reply.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.codeversion import code_version
from mnemoflow.lexical import content_words, count_tokens
from mnemoflow.llm.types import OFFLINE_MODEL, ChatRequest, Completion, EndpointSpec

#: A handler answers in text, or, for a request with ``tools``, with function calls:
#: ``[{"name": ..., "arguments": {...}}]`` (:class:`ToolCalls`).
Handler = Callable[[dict[str, Any]], "str | ToolCalls"]
HANDLERS: dict[str, Handler] = {}
#: Data files a task's handler answers from (templates): part of its identity, like its code.
READS: dict[str, tuple[Path, ...]] = {}

EMBED_DIM = 256


def handles(*tasks: str, reads: tuple[Path, ...] = ()) -> Callable[[Handler], Handler]:
    """Register a function ``fields -> reply text`` for one or more task tags; ``reads`` names
    the data files it answers from, so editing them invalidates its cached replies too."""

    def decorator(fn: Handler) -> Handler:
        for task in tasks:
            HANDLERS[task] = fn
            READS[task] = tuple(reads)
        return fn

    return decorator


class ToolCalls(list):
    """A handler's reply that calls functions: ``[{"name", "arguments": {...}}]``. Only a request
    that offered tools may get one; a function it did not offer is an error, never a reply."""


class OfflineBackendError(ValueError):
    """The offline backend was asked for a task it has no handler for, or lacked a field."""


class OfflineBackend:
    """Backend protocol implementation; stateless and deterministic."""

    async def complete(self, request: ChatRequest, spec: EndpointSpec) -> Completion:
        _load_handlers()
        handler = HANDLERS.get(request.task)
        if handler is None:
            raise OfflineBackendError(
                f"offline backend: no handler for task {request.task!r} (role {request.role}); "
                f"known tasks: {sorted(HANDLERS)}"
            )
        try:
            text = handler(request.fields)
        except KeyError as exc:
            raise OfflineBackendError(
                f"offline backend: task {request.task!r} needs field {exc.args[0]!r}"
            ) from exc
        tokens_in = sum(count_tokens(m.get("content") or "") for m in request.messages)
        if isinstance(text, ToolCalls):
            calls = _tool_calls(request, text)
            tokens_out = sum(count_tokens(c["name"] + c["arguments"]) for c in calls)
            return Completion(
                text="", model=OFFLINE_MODEL, tokens_in=tokens_in, tokens_out=tokens_out,
                tool_calls=calls,
            )  # fmt: skip
        return Completion(
            text=text, model=OFFLINE_MODEL, tokens_in=tokens_in, tokens_out=count_tokens(text)
        )

    async def embed(self, texts: list[str], spec: EndpointSpec) -> np.ndarray:
        return np.stack([hashed_embedding(text) for text in texts])

    async def aclose(self) -> None:
        return None


def _tool_calls(request: ChatRequest, calls: ToolCalls) -> list[dict[str, str]]:
    """A handler's function calls as an endpoint sends them (arguments as JSON strings)."""
    offered = {
        tool.get("function", {}).get("name")
        for tool in request.tools or ()
        if isinstance(tool, dict)
    }
    out = []
    for n, call in enumerate(calls):
        if call["name"] not in offered:
            raise OfflineBackendError(
                f"offline backend: task {request.task!r} called {call['name']!r}, which the "
                f"request did not offer (tools: {sorted(n for n in offered if n)})"
            )
        arguments = json.dumps(call["arguments"], ensure_ascii=False, sort_keys=True)
        out.append({"id": f"call_{n}", "name": call["name"], "arguments": arguments})
    return out


def hashed_embedding(text: str, dim: int = EMBED_DIM) -> np.ndarray:
    """L2-normalized feature-hashed bag of content words: a lexical stand-in for a dense model."""
    vector = np.zeros(dim, dtype=np.float32)
    for word in content_words(text):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vector[index] += sign
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def identity(task: str | None) -> str:
    """``offline-heuristic@<fingerprint>`` of the code that answers ``task`` (``None``: the
    embeddings), for the response cache key: editing a handler, or anything it calls, makes its
    cached replies a miss while the other tasks' replies stay valid."""
    if task is None:  # the embeddings: no need to import every chat handler (nltk among them)
        handler = hashed_embedding
    else:
        _load_handlers()
        handler = HANDLERS.get(task)
    if handler is None:
        return OFFLINE_MODEL  # no handler: the request fails in ``complete`` anyway
    try:
        version = code_version(f"{handler.__module__}:{handler.__name__}")
    except ValueError:  # registered from outside the package (a plugin, a test): its own source
        try:
            source = inspect.getsource(handler)
        except (OSError, TypeError):
            source = f"{handler.__module__}:{handler.__qualname__}"
        version = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    for path in READS.get(task, ()) if task is not None else ():
        version += "+" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return f"{OFFLINE_MODEL}@{version}"


_loaded = False


def _load_handlers() -> None:
    global _loaded
    if not _loaded:
        from mnemoflow.llm.offline import (  # noqa: F401
            a_mem,
            environment_sessions,
            environment_state,
            graphiti,
            interactive,
            judge,
            langmem,
            mem0,
            memorybench,
            memorybench_judges,
            memoryos,
            notes,
            reader,
            self_evolution,
            user,
            writer,
        )

        _loaded = True
