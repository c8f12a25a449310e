"""A local OpenAI-compatible server for tests and benchmarks: latency, faults and counters.

It serves ``/v1/chat/completions``, ``/v1/embeddings``, ``/v1/models`` and the Batch API
(``/v1/files``, ``/v1/batches``: :mod:`mnemoflow.testing.batch_api`) on a loopback address,
answers deterministically (a fixed text, a function of the request, or by default an echo of the
last user message) with realistic ``usage``, and injects faults from a *plan*: the n-th attempt of
each distinct request body gets ``faults[n]`` (``"500"``, ``"429"``, ``"timeout"``, ``"malformed"``,
...) and later attempts succeed. Because faults are keyed by the request body, a client that
retries correctly sees every request answered exactly once, and the counters prove it. Attempts
past the plan may also draw a fault at random from ``fault_rates`` (e.g. ``{"500": 0.2}``); the
draw is seeded by the body and attempt number, so two runs with the same requests see the same
faults.

Use it in-process (``with OpenAITestServer(latency=0.05) as server: server.base_url``; it runs
its own event loop in a background thread so it never shares the client's loop) or as a separate
process: ``python -m mnemoflow.testing.openai_server --port 0 --latency 0.05`` prints
``serving http://127.0.0.1:PORT/v1`` once it listens. ``GET /mnemoflow/stats`` returns the counters
as JSON and ``POST /mnemoflow/reset`` clears them, for out-of-process users such as bench/.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import email.utils
import hashlib
import ipaddress
import json
import math
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from mnemoflow.lexical import count_tokens
from mnemoflow.llm.gateway import original_messages
from mnemoflow.testing.batch_api import BatchAPI
from mnemoflow.testing.prefix_cache import (
    BLOCK_TOKENS,
    IdealCache,
    PrefixCache,
    block_chain,
    prompt_stream,
)

#: Fault kinds a plan may name; anything else is rejected when the server is built.
FAULT_KINDS = {
    "500": "HTTP 500 with a JSON error body",
    "502": "HTTP 502 with an HTML body (a proxy in front of the model)",
    "503": "HTTP 503 with a JSON error body and Retry-After",
    "429": "HTTP 429 rate limit with Retry-After",
    "timeout": "sleep `hang` seconds before answering (past the client's timeout)",
    "malformed": "HTTP 200, Content-Type application/json, truncated JSON body",
    "html": "HTTP 200 with a non-JSON text/html body",
    "nochoices": "HTTP 200 with valid JSON that lacks `choices`",
    "null_content": "HTTP 200, a well-formed completion whose message content is null",
    "garbled": "HTTP 200, a well-formed completion whose text no caller's parser accepts",
    "400": "HTTP 400 bad request (not retryable)",
    "disconnect": "close the connection without answering (a crashed or restarted server)",
}

DEFAULT_MODEL = "mnemoflow-test"

#: The text of a ``garbled`` reply: no verdict word, no JSON, no option, not empty.
GARBLED_TEXT = "<|garbled|> ... ###"

#: Fault kinds whose response is still a well-formed completion (counted as answered).
_ANSWERING_FAULTS = ("", "timeout", "null_content", "garbled")

#: A reply callable may also return ``{"content": ..., "tool_calls": [{"name", "arguments"}]}``
#: (arguments a JSON string or an object): the reply then calls those functions.
Reply = str | Callable[[dict[str, Any]], str | dict[str, Any]] | None

#: ``think="inline"``: what every reply's content starts with, as Qwen3 served with thinking on
#: writes it; a wrong draft in every format a parser might look for (a ```json block, a bare
#: object, a verdict word, an option number), so a parser that reads the thinking gets it wrong.
THINK_DRAFT = (
    "Let me draft an answer first.\n"
    '```json\n{"answer": 1, "implicit_action": "dislike", "behavior": "draft", "response": '
    '"DRAFT", "score": 1, "rating": 1, "reasoning": "draft"}\n```\n'
    "Verdict: WRONG. Option 1. Hmm, let me check that again."
)

#: ``reject_response_format=True``: the 400 message (as vLLM words it without guided decoding).
RESPONSE_FORMAT_REJECTED = (
    "1 validation error for ChatCompletionRequest: response_format json_schema is not "
    "supported by this server (guided decoding is disabled)"
)


#: ``response_formats=(...)``: llama-cpp-python's server's answer (HTTP 500, FastAPI's
#: RequestValidationError as text) to a ``response_format`` whose type it does not take.
LLAMA_CPP_REJECTED = (
    "1 validation error:\n  {{'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be {expected}\", 'input': '{got}', 'ctx': {{'expected': "
    '"{expected}"}}}}\n'
)


def request_id(body: dict[str, Any]) -> str:
    """Identity of a distinct request: sha256 of its canonical JSON body (first 16 hex digits)."""
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def original_body(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without a trailing gateway re-ask: the request it is another attempt at."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return body
    original = original_messages(messages)
    return body if original is messages else {**body, "messages": original}


def echo_reply(body: dict[str, Any]) -> str:
    """Default reply: derived from the last user message of the original prompt (a re-ask's
    follow-up aside), so distinct prompts get distinct text and a re-ask gets the same text."""
    last = ""
    for message in original_body(body).get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            last = _text_of(message.get("content"))
    return f"echo: {last}"


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Approximate prompt tokens the way chat models bill them: content plus a per-message cost."""
    return 3 + sum(4 + count_tokens(_text_of(m.get("content"))) for m in messages)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def fake_embedding(text: str, dim: int) -> np.ndarray:
    """A deterministic unit vector seeded by the text (no meaning, only identity)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.float32(np.linalg.norm(vector))


@dataclass
class ServerStats:
    """Counters, per distinct request body (see :func:`request_id`; a re-ask counts under the
    body it re-asks, :func:`original_body`) and overall."""

    attempts: Counter[str] = field(default_factory=Counter)  # every request received
    answered: Counter[str] = field(default_factory=Counter)  # 200 with a well-formed reply
    faults: Counter[str] = field(default_factory=Counter)  # injected faults, by kind
    paths: Counter[str] = field(default_factory=Counter)
    inflight: int = 0
    max_inflight: int = 0
    total: int = 0
    #: with ``prefix_cache_blocks``: prompt tokens of the chat completions answered, those the
    #: bounded prefix cache served, those an unbounded one would have served, and the most the
    #: bounded one could serve in any order (the ideal's blocks at most N deep in their chain)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ideal_cached_tokens: int = 0
    bound_cached_tokens: int = 0

    def copy(self) -> ServerStats:
        return ServerStats(
            Counter(self.attempts),
            Counter(self.answered),
            Counter(self.faults),
            Counter(self.paths),
            self.inflight,
            self.max_inflight,
            self.total,
            self.prompt_tokens,
            self.cached_tokens,
            self.ideal_cached_tokens,
            self.bound_cached_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempts": dict(self.attempts),
            "answered": dict(self.answered),
            "faults": dict(self.faults),
            "paths": dict(self.paths),
            "inflight": self.inflight,
            "max_inflight": self.max_inflight,
            "total": self.total,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "ideal_cached_tokens": self.ideal_cached_tokens,
            "bound_cached_tokens": self.bound_cached_tokens,
        }


class OpenAITestServer:
    """An OpenAI-compatible HTTP server with deterministic replies and planned faults.

    ``faults`` is the plan applied to every distinct request body: attempt n (0-based) gets
    ``faults[n]``, attempts past the plan succeed (a gateway re-ask is the next attempt of the
    body it re-asks, see the module docstring). ``retry_after`` is sent with 429 and 503
    (seconds; ``retry_after_date=True`` sends it as an HTTP date instead). ``hang`` is how long a
    ``"timeout"`` fault sleeps. ``api_key``, when set, is required as a Bearer token (401
    otherwise); it is compared and never stored or logged. ``think="inline"`` puts
    ``<think>`` + :data:`THINK_DRAFT` + ``</think>`` before every reply's content (Qwen3 on vLLM
    with thinking on), ``think="field"`` puts the draft in ``reasoning_content`` (vLLM's
    ``--reasoning-parser``); ``reject_response_format=True`` answers HTTP 400 to any chat request
    carrying ``response_format``, counted as fault ``response_format``; ``response_formats``
    (e.g. ``("text", "json_object")``, llama-cpp-python's) answers a ``response_format`` of
    another type as that server does, HTTP 500 with a request-validation error
    (:data:`LLAMA_CPP_REJECTED`), counted the same way. ``prompt_cache=True``
    imitates a provider's prompt cache: ``usage.prompt_tokens_details.cached_tokens`` is the
    prompt tokens of the longest run of leading messages an earlier request already sent, without
    bound; ``prefix_cache_blocks=N`` instead imitates vLLM's automatic prefix caching with room
    for N blocks of ``prefix_block_tokens`` (:mod:`mnemoflow.testing.prefix_cache`: an LRU over
    chained block hashes, looked up when a request arrives and filled when it completes), and
    the counters add the prompt tokens, those served and those an unbounded cache would serve.
    ``prefixes`` serves the API under each ``PREFIX/v1`` too (a gateway whose path holds a token),
    and ``headers`` (name -> value) must all be sent with every request (401 otherwise), like
    ``api_key`` compared and never logged.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        jitter: float = 0.0,
        faults: Sequence[str] = (),
        fault_rates: dict[str, float] | None = None,
        retry_after: float | None = 1.0,
        retry_after_date: bool = False,
        hang: float = 30.0,
        reply: Reply = None,
        model: str = DEFAULT_MODEL,
        embed_dim: int = 64,
        api_key: str | None = None,
        think: str = "",
        reject_response_format: bool = False,
        response_formats: Sequence[str] | None = None,
        prompt_cache: bool = False,
        prefix_cache_blocks: int | None = None,
        prefix_block_tokens: int = BLOCK_TOKENS,
        prefixes: Sequence[str] = (),
        headers: dict[str, str] | None = None,
        batch_delay: float = 0.0,
        batch_line_errors: int = 0,
        batch_expire: int = 0,
    ):
        if think not in ("", "inline", "field"):
            raise ValueError(f"openai test server: think is '', 'inline' or 'field', got {think!r}")
        if not _is_loopback(host):
            raise ValueError(f"openai test server: host must be a loopback address, got {host!r}")
        fault_rates = dict(fault_rates or {})
        unknown = [kind for kind in [*faults, *fault_rates] if kind not in FAULT_KINDS]
        if unknown:
            raise ValueError(
                f"openai test server: unknown fault kinds {unknown}; known: {sorted(FAULT_KINDS)}"
            )
        if any(r < 0 for r in fault_rates.values()) or sum(fault_rates.values()) > 1:
            raise ValueError(
                f"openai test server: fault rates must be >= 0 and sum to <= 1, got {fault_rates}"
            )
        if latency < 0 or hang < 0:
            raise ValueError("openai test server: latency and hang must be >= 0")
        if not 0 <= jitter <= 1:
            raise ValueError("openai test server: jitter must be within [0, 1]")
        self.host = host
        self.port = port
        self.latency = latency
        self.jitter = jitter
        self.faults = list(faults)
        self.fault_rates = fault_rates
        self.retry_after = retry_after
        self.retry_after_date = retry_after_date
        self.hang = hang
        self.reply = reply
        self.model = model
        self.embed_dim = embed_dim
        self.think = think
        self.reject_response_format = reject_response_format
        self.response_formats = tuple(response_formats) if response_formats is not None else None
        self.prompt_cache = prompt_cache
        self._prefixes: set[str] = set()  # digests of the leading messages sent so far
        if prefix_cache_blocks is not None and prompt_cache:
            raise ValueError("openai test server: prompt_cache or prefix_cache_blocks, not both")
        self.prefix_cache = (
            PrefixCache(prefix_cache_blocks, prefix_block_tokens)
            if prefix_cache_blocks is not None
            else None
        )
        self._ideal_cache = IdealCache()
        #: id(body) of a chat request in flight -> (its block chain, blocks served on arrival)
        self._arrived: dict[int, tuple[list[str], int]] = {}
        self._api_key = api_key
        self.prefixes = ["", *("/" + prefix.strip("/") for prefix in prefixes)]
        self._headers = dict(headers or {})
        #: ``/v1/files`` and ``/v1/batches`` (:mod:`mnemoflow.testing.batch_api`)
        self.batch_api = BatchAPI(
            self.answer,
            delay=batch_delay,
            line_errors=batch_line_errors,
            expire=batch_expire,
        )
        self._stats = ServerStats()
        self._lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client (ends in ``/v1``)."""
        if self._runner is None:
            raise RuntimeError("openai test server: not started")
        return f"http://{self.host}:{self.port}/v1"

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        for prefix in self.prefixes:
            app.router.add_post(f"{prefix}/v1/chat/completions", self._chat)
            app.router.add_post(f"{prefix}/v1/embeddings", self._embeddings)
            app.router.add_get(f"{prefix}/v1/models", self._models)
            self.batch_api.routes(app, prefix)
        app.router.add_get("/mnemoflow/stats", self._stats_route)
        app.router.add_post("/mnemoflow/reset", self._reset_route)
        return app

    async def astart(self) -> OpenAITestServer:
        """Start serving on the running event loop (port 0 picks a free port)."""
        runner = web.AppRunner(
            self.make_app(), access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = int(runner.addresses[0][1])
        self._runner = runner
        return self

    async def astop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> OpenAITestServer:
        """Serve from a background thread with its own event loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("openai test server: already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.astart())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.astop())
            loop.close()

        self._thread = threading.Thread(target=run, name="openai-test-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        self._loop = None

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- counters --------------------------------------------------------------------------

    def stats(self) -> ServerStats:
        """A snapshot of the counters (safe to call from any thread)."""
        with self._lock:
            return self._stats.copy()

    def reset(self) -> None:
        """Clear the counters (the fault plan starts again for every body); requests still in
        flight stay counted as in flight."""
        with self._lock:
            self._stats = ServerStats(inflight=self._stats.inflight)
            if self.prefix_cache is not None:  # a bench's next run starts cold
                self.prefix_cache = PrefixCache(
                    self.prefix_cache.capacity, self.prefix_cache.block_tokens
                )
                self._ideal_cache = IdealCache()

    # ---- handlers --------------------------------------------------------------------------

    def _enter(self, path: str, rid: str | None) -> int:
        """Count one request; returns its 0-based attempt number for this body."""
        with self._lock:
            stats = self._stats
            stats.total += 1
            stats.paths[path] += 1
            stats.inflight += 1
            stats.max_inflight = max(stats.max_inflight, stats.inflight)
            if rid is None:
                return 0
            attempt = stats.attempts[rid]
            stats.attempts[rid] += 1
            return attempt

    def _leave(self, rid: str | None = None, answered: bool = False, fault: str = "") -> None:
        with self._lock:
            self._stats.inflight -= 1
            if answered and rid is not None:
                self._stats.answered[rid] += 1
            if fault:
                self._stats.faults[fault] += 1

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        if any(request.headers.get(name) != value for name, value in self._headers.items()):
            return _error(401, "missing_header", "A required header is missing or wrong.")
        if self._api_key is None:
            return None
        if request.headers.get("Authorization", "") == f"Bearer {self._api_key}":
            return None
        return _error(401, "invalid_api_key", "Incorrect API key provided.")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(
            request,
            "chat",
            _check_chat,
            lambda body, fault: self._completion(body, fault),
        )

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "embeddings", _check_embeddings, self._embedding_reply)

    async def _serve(
        self,
        request: web.Request,
        endpoint: str,
        check: Callable[[dict[str, Any]], str | None],
        reply: Callable[[dict[str, Any], str], web.StreamResponse],
    ) -> web.StreamResponse:
        """One attempt at an endpoint: count it, validate, wait, then answer or inject its fault."""
        body, problem = await _read_json(request)
        rid = request_id(original_body(body)) if body is not None else None
        attempt = self._enter(endpoint, rid)
        answered, fault = False, ""
        try:
            if problem is not None:
                return problem
            assert body is not None
            denied = self._unauthorized(request)
            if denied is not None:
                return denied
            invalid = check(body)
            if invalid is not None:
                return _error(400, "invalid_request_error", invalid)
            if self.reject_response_format and body.get("response_format") is not None:
                fault = "response_format"
                return _error(400, "BadRequestError", RESPONSE_FORMAT_REJECTED)
            refused = self._refused_format(body.get("response_format"))
            if refused is not None:
                fault = "response_format"
                return _error(500, "internal_server_error", refused)
            fault = self._fault(rid, attempt)
            # A "timeout" fault sleeps past the client's timeout; the client hangs up and the
            # handler is cancelled here. A client patient enough to wait gets a normal answer.
            if endpoint == "chat":
                self._prefix_arrive(body)
            await asyncio.sleep(self.hang if fault == "timeout" else self._latency(rid, attempt))
            if fault not in _ANSWERING_FAULTS:
                return self._fault_response(fault, request)
            answered = True
            return reply(body, fault)
        finally:
            self._arrived.pop(id(body), None)
            self._leave(rid, answered=answered, fault=fault)

    def _refused_format(self, response_format: Any) -> str | None:
        """llama-cpp-python's message for a ``response_format`` type not in
        ``response_formats`` (None: it is taken)."""
        if self.response_formats is None or not isinstance(response_format, dict):
            return None
        got = response_format.get("type")
        if got in self.response_formats:
            return None
        expected = " or ".join(f"'{t}'" for t in self.response_formats)
        return LLAMA_CPP_REJECTED.format(expected=expected, got=got)

    def _fault(self, rid: str | None, attempt: int) -> str:
        """The fault of this attempt: the plan's, else a seeded draw from ``fault_rates``."""
        if attempt < len(self.faults):
            return self.faults[attempt]
        if not self.fault_rates:
            return ""
        u = random.Random(f"fault:{rid}:{attempt}").random()
        for kind, rate in self.fault_rates.items():
            if u < rate:
                return kind
            u -= rate
        return ""

    def _latency(self, rid: str | None, attempt: int) -> float:
        """``latency``, or with ``jitter`` j a value uniform in latency * [1 - j, 1 + j] (same
        mean), drawn deterministically from the request body and attempt number."""
        if not self.jitter or not self.latency:
            return self.latency
        u = random.Random(f"{rid}:{attempt}").uniform(-1.0, 1.0)
        return self.latency * (1.0 + self.jitter * u)

    def _fault_response(self, kind: str, request: web.Request) -> web.StreamResponse:
        if kind == "disconnect":
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPInternalServerError()  # never sent: the connection is gone
        if kind in ("500", "400"):
            status = int(kind)
            code = "server_error" if status == 500 else "invalid_request_error"
            return _error(status, code, f"injected fault {kind}")
        if kind == "502":
            return web.Response(
                status=502,
                text="<html><body>502 Bad Gateway</body></html>",
                content_type="text/html",
            )
        if kind in ("429", "503"):
            status = int(kind)
            headers = {}
            if self.retry_after is not None:
                headers["Retry-After"] = self._retry_after_value()
            code = "rate_limit_exceeded" if status == 429 else "overloaded"
            return _error(status, code, f"injected fault {kind}", headers)
        if kind == "malformed":
            return web.Response(
                status=200,
                text='{"id": "chatcmpl-x", "choices": [{"mess',
                content_type="application/json",
            )
        if kind == "html":
            return web.Response(
                status=200,
                text="<html><body>upstream error</body></html>",
                content_type="text/html",
            )
        if kind == "nochoices":
            return web.json_response({"id": "chatcmpl-x", "object": "chat.completion"})
        raise AssertionError(kind)

    def _retry_after_value(self) -> str:
        assert self.retry_after is not None
        if self.retry_after_date:
            # HTTP dates have one-second resolution: round up so the client never waits too little.
            return email.utils.formatdate(math.ceil(time.time() + self.retry_after), usegmt=True)
        return f"{self.retry_after:g}"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion body the server answers ``body`` with (a batch's line too)."""
        return json.loads(self._completion(body).body)

    def _completion(self, body: dict[str, Any], fault: str = "") -> web.Response:
        if fault == "garbled":
            text = GARBLED_TEXT
        elif callable(self.reply):
            text = self.reply(body)
        elif self.reply is not None:
            text = self.reply
        else:
            text = echo_reply(body)
        calls = None
        if isinstance(text, dict):  # a reply callable's function calls (requests with tools)
            calls = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call["arguments"], str)
                        else json.dumps(call["arguments"]),
                    },
                }
                for n, call in enumerate(text.get("tool_calls", []))
            ]
            text = text.get("content") or ""
        finish = "stop"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(max_tokens, int) and max_tokens > 0:
            tokens = text.split()
            if len(tokens) > max_tokens:
                text, finish = " ".join(tokens[:max_tokens]), "length"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["content"], message["tool_calls"], finish = None, calls, "tool_calls"
        if self.think == "inline":
            message["content"] = f"<think>\n{THINK_DRAFT}\n</think>\n\n{text}"
        elif self.think == "field":  # vLLM's --reasoning-parser moves the thinking here
            message["reasoning_content"] = THINK_DRAFT
        if fault == "null_content":
            message["content"] = None
        usage_out = count_tokens(f"{THINK_DRAFT} {text}" if self.think else text)
        usage_in = prompt_tokens(body["messages"])
        usage: dict[str, Any] = {
            "prompt_tokens": usage_in,
            "completion_tokens": usage_out,
            "total_tokens": usage_in + usage_out,
        }
        if self.prompt_cache:
            usage["prompt_tokens_details"] = {
                "cached_tokens": self._cached_prefix(body["messages"])
            }
        if self.prefix_cache is not None:
            usage["prompt_tokens_details"] = {
                "cached_tokens": self._prefix_complete(body, usage_in)
            }
        rid = request_id(body)
        return web.json_response(
            {
                "id": f"chatcmpl-{rid}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or self.model,
                "system_fingerprint": "mnemoflow-test",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            }
        )

    def _cached_prefix(self, messages: list[dict[str, Any]]) -> int:
        """Prompt tokens of the longest run of leading messages (not all of them) that an
        earlier request sent; then remember every run of this request's."""
        digests = [
            hashlib.sha256(json.dumps(messages[:n], sort_keys=True).encode()).hexdigest()
            for n in range(1, len(messages) + 1)
        ]
        with self._lock:
            seen = max((n for n in range(1, len(messages)) if digests[n - 1] in self._prefixes),
                       default=0)  # fmt: skip
            self._prefixes.update(digests)
        return prompt_tokens(messages[:seen]) - 3 if seen else 0

    def _prefix_arrive(self, body: dict[str, Any]) -> None:
        """A chat request starts: the leading blocks of its prompt the bounded cache holds now
        (and, for the counters, those an unbounded cache filled on arrival would hold)."""
        if self.prefix_cache is None:
            return
        stream = prompt_stream(body["messages"], _text_of)
        chain = block_chain(stream, self.prefix_cache.block_tokens)
        with self._lock:
            self._arrived[id(body)] = (chain, self.prefix_cache.lookup(chain))

    def _prefix_complete(self, body: dict[str, Any], prompt: int) -> int:
        """A chat request completes: its blocks enter the cache; returns its cached tokens."""
        assert self.prefix_cache is not None
        chain, served = self._arrived.pop(id(body), ([], 0))
        size = self.prefix_cache.block_tokens
        with self._lock:
            self.prefix_cache.fill(chain)
            ideal = self._ideal_cache.arrive(chain)
            self._stats.prompt_tokens += prompt
            self._stats.cached_tokens += served * size
            self._stats.ideal_cached_tokens += ideal * size
            self._stats.bound_cached_tokens += min(ideal, self.prefix_cache.capacity) * size
        return served * size

    def _embedding_reply(self, body: dict[str, Any], fault: str) -> web.StreamResponse:
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        dim = body.get("dimensions") or self.embed_dim
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(text, int(dim))
            value: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                if as_base64
                else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": value})
        n_tokens = sum(count_tokens(t) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.model,
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
            }
        )

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._enter("models", None)
        try:
            denied = self._unauthorized(request)
            if denied is not None:
                return denied
            entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "mnemoflow"}
            return web.json_response({"object": "list", "data": [entry]})
        finally:
            self._leave()

    async def _stats_route(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.stats().to_dict())

    async def _reset_route(self, request: web.Request) -> web.StreamResponse:
        self.reset()
        return web.json_response({"ok": True})


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    payload = {"error": {"message": message, "type": code, "code": code, "param": None}}
    return web.json_response(payload, status=status, headers=headers)


async def _read_json(request: web.Request) -> tuple[dict[str, Any] | None, web.Response | None]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, _error(400, "invalid_request_error", "request body is not JSON")
    if not isinstance(body, dict):
        return None, _error(400, "invalid_request_error", "request body must be a JSON object")
    return body, None


def _check_embeddings(body: dict[str, Any]) -> str | None:
    texts = body.get("input")
    if isinstance(texts, str):
        return None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return "'input' must be a string or strings"
    return None


def _check_chat(body: dict[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "'model' is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            return f"messages[{index}] must be an object with a 'role'"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mnemoflow.testing.openai_server",
        description="Local OpenAI-compatible server with latency and fault injection (loopback).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    parser.add_argument(
        "--jitter", type=float, default=0.0, help="latency varies uniformly by +- this fraction"
    )
    parser.add_argument(
        "--faults",
        default="",
        help="comma-separated plan applied to each distinct request, e.g. 500,429,timeout; "
        f"kinds: {','.join(FAULT_KINDS)}",
    )
    parser.add_argument(
        "--fault-rates",
        default="",
        help="random faults after the plan, seeded per request, e.g. 500=0.2,429=0.1,garbled=0.05",
    )
    parser.add_argument("--retry-after", type=float, default=1.0, help="seconds, for 429/503")
    parser.add_argument("--retry-after-date", action="store_true", help="send it as an HTTP date")
    parser.add_argument("--hang", type=float, default=30.0, help="seconds a timeout fault sleeps")
    parser.add_argument("--reply", default=None, help="fixed reply text (default: echo)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id listed by /v1/models")
    parser.add_argument(
        "--think",
        choices=("inline", "field"),
        default="",
        help="a wrong draft as thinking: inline (<think>...</think> before the content, as "
        "Qwen3 on vLLM without --reasoning-parser) or field (in reasoning_content)",
    )
    parser.add_argument(
        "--reject-response-format",
        action="store_true",
        help="answer HTTP 400 to any request with response_format (no structured output)",
    )
    parser.add_argument(
        "--prefix-cache-blocks",
        type=int,
        default=None,
        help="imitate vLLM's prefix cache with room for N blocks of 16 prompt tokens (LRU, "
        "filled when a request completes; replies carry usage.prompt_tokens_details.cached_tokens)",
    )
    parser.add_argument(
        "--api-key-env", default=None, help="require the key held in this env var as Bearer token"
    )
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env: environment variable {args.api_key_env} is not set")
    faults = [kind.strip() for kind in args.faults.split(",") if kind.strip()]
    try:
        rates = {
            kind.strip(): float(rate)
            for kind, _, rate in (part.partition("=") for part in args.fault_rates.split(","))
            if kind.strip()
        }
    except ValueError:
        parser.error(f"--fault-rates: KIND=RATE,..., got {args.fault_rates!r}")
    try:
        server = OpenAITestServer(
            host=args.host,
            port=args.port,
            latency=args.latency,
            jitter=args.jitter,
            faults=faults,
            fault_rates=rates,
            retry_after=args.retry_after,
            retry_after_date=args.retry_after_date,
            hang=args.hang,
            reply=args.reply,
            model=args.model,
            api_key=api_key,
            think=args.think,
            reject_response_format=args.reject_response_format,
            prefix_cache_blocks=args.prefix_cache_blocks,
        )
    except ValueError as exc:
        parser.error(str(exc))

    async def serve() -> None:
        await server.astart()
        print(f"serving {server.base_url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        await server.astop()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
