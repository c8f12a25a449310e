"""The network backend: any OpenAI-compatible endpoint (vLLM, OpenAI, llama.cpp server, ...).

One instance serves one role's endpoint. It owns what makes a remote endpoint usable at scale:

- a concurrency limit (``spec.concurrency`` requests in flight, and an HTTP connection pool of the
  same size, so no request waits for a socket while holding a slot), over the client's aiohttp
  transport;
- an optional ``requests_per_minute`` limiter (requests spaced evenly; every attempt counts);
- a per-attempt timeout (``spec.timeout``);
- our own retry loop instead of the ``openai`` client's (which is disabled): exponential backoff
  with jitter, ``Retry-After`` honoured (seconds, ``retry-after-ms`` or an HTTP date) on 429 and
  5xx, timeouts and connection errors retried, a malformed 200 body retried like a 5xx, up to
  ``spec.max_retries`` retries; any other 4xx fails at once. Owning the loop is what lets the
  gateway report how many retries each reply took, and honour Retry-After for every status.

Requests go through ``AsyncOpenAI.post(..., cast_to=httpx2.Response)`` and the body is parsed here:
the client's typed models would accept a truncated or non-JSON body silently (it returns the text
as a string), and parsing the few fields we need directly is also cheaper per call.

The API key is read from ``os.environ[spec.api_key_env]`` once, at construction, and lives only in
the client; so are the headers of ``spec.headers_env`` and, with ``spec.base_url_env``, the URL
itself. Error messages name the endpoint by its redacted address and are scrubbed of all of them
(:mod:`mnemoflow.llm.addresses`).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2
import numpy as np
import openai

from mnemoflow.errors import ConfigError
from mnemoflow.llm.addresses import redact, secrets_in
from mnemoflow.llm.structured import (
    config_key,
    is_validation_error,
    refuses_structured_output,
    rejected_field,
)
from mnemoflow.llm.types import (
    OWN_BODY_FIELDS,
    ChatRequest,
    Completion,
    EndpointError,
    EndpointSpec,
    RejectedRequest,
)
from mnemoflow.llm.urls import url_host

T = TypeVar("T")

#: Local servers (vLLM, llama.cpp) accept any key; the client insists on having one.
PLACEHOLDER_KEY = "EMPTY"

#: Statuses worth retrying: request timeout, lock conflict, rate limit, server errors.
RETRY_STATUSES = frozenset({408, 409, 429})


class MalformedReply(ValueError):
    """A 200 response whose body is not a usable completion (truncated JSON, HTML, no choices).

    The message may quote the body in full: the backend scrubs the key from it before cutting it
    to length (a body cut first could keep part of a key that a proxy echoed).
    """


class _RateLimiter:
    """Spaces request starts ``60 / rpm`` seconds apart (a smooth limiter, no bursts)."""

    def __init__(self, requests_per_minute: float):
        self.interval = 60.0 / requests_per_minute
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


class SharedLimit:
    """Slots and request spacing shared by every role of a job bound to one endpoint.

    A workflow job holds a share of the endpoint's run-wide budget (:mod:`mnemoflow.llm.limits`);
    its roles on that endpoint draw from this one limit, so the job never exceeds its share.
    """

    def __init__(self, concurrency: int, requests_per_minute: float | None):
        self.concurrency = concurrency
        self.requests_per_minute = requests_per_minute
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._limiter: _RateLimiter | None = None

    def bind(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[asyncio.Semaphore, _RateLimiter | None]:
        if self._loop is not loop or self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
            rpm = self.requests_per_minute
            self._limiter = _RateLimiter(rpm) if rpm else None
            self._loop = loop
        return self._slots, self._limiter


class OpenAIBackend:
    """Backend protocol implementation over the ``openai`` package's ``AsyncOpenAI``."""

    #: Backoff: attempt n waits min(cap, base * 2**(n-1)) scaled by a random factor in [0.5, 1].
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    #: A Retry-After longer than this (a quota reset, not a hiccup) fails instead of sleeping.
    max_retry_after: float = 300.0
    #: Texts per /v1/embeddings request.
    embed_batch: int = 128

    def __init__(self, spec: EndpointSpec, shared: SharedLimit | None = None):
        if not spec.base_url:
            raise ConfigError(
                f"config models.{spec.role}.base_url: required for the openai backend"
            )
        for name, value in (
            ("concurrency", spec.concurrency),
            ("timeout", spec.timeout),
            ("requests_per_minute", spec.requests_per_minute),
        ):
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ConfigError(f"config models.{spec.role}.{name}: must be > 0, got {value!r}")
        key = _from_env(spec.api_key_env, spec.role, "api_key_env") or PLACEHOLDER_KEY
        self._url = _from_env(spec.base_url_env, spec.role, "base_url_env") or spec.base_url
        self._headers = {
            header: _from_env(variable, spec.role, f"headers_env.{header}")
            for header, variable in (spec.headers_env or {}).items()
        }
        self.spec = spec
        self._shared = shared
        self._api_key = key
        hidden = [key] if key != PLACEHOLDER_KEY else []
        self._secrets = [*hidden, *secrets_in(self._url, self._headers)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._slots: asyncio.Semaphore | None = None
        self._limiter: _RateLimiter | None = None

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(role={self.spec.role!r}, model={self.spec.model!r})"

    def _bind(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """Client, slots and limiter belong to one event loop; rebuild them for a new loop.

        Scripts may call ``asyncio.run`` more than once with the same gateway; connections and
        semaphores from a finished loop cannot be reused, so they are dropped, not shared.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._slots is None:
            spec = self.spec
            # The aiohttp transport costs about half the CPU per request of httpx's own pool
            # (measured: docs/performance.md), which is what bounds throughput on small machines.
            http_client = openai.DefaultAioHttpClient(
                limits=httpx2.Limits(
                    max_connections=spec.concurrency, max_keepalive_connections=spec.concurrency
                ),
                timeout=httpx2.Timeout(spec.timeout),
            )
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._url,
                default_headers=self._headers or None,
                timeout=spec.timeout,
                max_retries=0,
                http_client=http_client,
            )
            if self._shared is not None:
                self._slots, self._limiter = self._shared.bind(loop)
            else:
                self._slots = asyncio.Semaphore(spec.concurrency)
                self._limiter = (
                    _RateLimiter(spec.requests_per_minute) if spec.requests_per_minute else None
                )
            self._loop = loop
        return self._client, self._slots

    # ---- the Backend protocol --------------------------------------------------------------

    async def complete(self, request: ChatRequest, spec: EndpointSpec) -> Completion:
        body = chat_body(request, spec)
        ((text, model, tokens_in, tokens_out, cached_in), calls), retries = await self._post(
            "/chat/completions", body, lambda data: (parse_completion(data), parse_tool_calls(data))
        )
        return Completion(
            text=text,
            model=model or spec.model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            retries=retries,
            cached_in=cached_in,
            tool_calls=calls if request.tools is not None else None,
        )

    async def embed(
        self, texts: list[str], spec: EndpointSpec, usage: list[int] | None = None
    ) -> np.ndarray:
        """The texts' vectors, in batches; ``usage`` (when given) gets each batch's
        ``usage.prompt_tokens``, which the gateway's ledger counts and prices."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        batches = [
            texts[start : start + self.embed_batch]
            for start in range(0, len(texts), self.embed_batch)
        ]

        async def one(batch: list[str]) -> np.ndarray:
            body = {"model": spec.model, "input": batch, "encoding_format": "float"}
            body.update(spec.extra_body or {})
            (matrix, tokens), _ = await self._post(
                "/embeddings", body, lambda data: (parse_embeddings(data, len(batch)), _usage(data))
            )
            if usage is not None:
                usage.append(tokens)
            return matrix

        parts = await asyncio.gather(*(one(batch) for batch in batches))
        dims = {part.shape[1] for part in parts}
        if len(dims) != 1:
            raise EndpointError(f"{self._where()}: embedding batches differ in dimension {dims}")
        return np.concatenate(parts)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()
        self._loop = None

    # ---- the retry loop --------------------------------------------------------------------

    async def _post(
        self, path: str, body: dict[str, Any], parse: Callable[[dict[str, Any]], T]
    ) -> tuple[T, int]:
        """POST with limits and retries; returns ``parse(json body)`` and the failed attempts.

        ``parse`` runs inside the loop so that a malformed body is retried like a 5xx.
        """
        client, slots = self._bind()
        spec = self.spec
        failures = 0
        invalid = ""  # the last request-validation error: its repetition is not retried
        while True:
            retry_after: float | None = None
            async with slots:
                if self._limiter is not None:
                    await self._limiter.wait()
                try:
                    async with asyncio.timeout(spec.timeout):
                        response = await client.post(path, body=body, cast_to=httpx2.Response)
                        content = await response.aread()
                    return parse(_parse_json(content)), failures
                except openai.APIStatusError as exc:
                    status, detail = exc.status_code, self._detail(exc)
                    if status not in RETRY_STATUSES and status < 500:
                        raise self._rejected(status, detail) from None
                    if status >= 500 and is_validation_error(detail):
                        # deterministic: a refused response_format at once, another one once
                        if refuses_structured_output(status, detail) or detail == invalid:
                            raise self._rejected(status, detail, detail == invalid) from None
                        invalid = detail
                    reason = f"HTTP {status}: {detail}"
                    retry_after = parse_retry_after(exc.response.headers)
                except (TimeoutError, openai.APITimeoutError):
                    reason = f"no reply within timeout {spec.timeout:g} s"
                except openai.APIConnectionError as exc:
                    reason = f"connection error ({self._scrub(str(exc.__cause__ or exc))})"
                except MalformedReply as exc:
                    reason = f"malformed reply ({self._scrub(str(exc))})"
            failures += 1
            if failures > spec.max_retries:
                raise EndpointError(
                    f"{self._where()}: gave up after {failures} attempt{'s' * (failures > 1)} "
                    f"(max_retries {spec.max_retries}); last: {reason}"
                )
            if retry_after is not None and retry_after > self.max_retry_after:
                raise EndpointError(
                    f"{self._where()}: {reason}; server asks to retry after {retry_after:.0f} s "
                    f"(more than {self.max_retry_after:.0f} s), giving up"
                )
            await asyncio.sleep(self.delay(failures, retry_after))

    def delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait before the next attempt: the server's Retry-After when it gave one,
        else exponential backoff with jitter (so synchronized clients spread out)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        ceiling = min(self.backoff_cap, self.backoff_base * 2 ** (failures - 1))
        return ceiling * random.uniform(0.5, 1.0)

    def _where(self) -> str:
        return f"models.{self.spec.role} ({self.spec.model} at {redact(self._url)})"

    def _rejected(self, status: int, detail: str, repeated: bool = False) -> RejectedRequest:
        """The one-line error of a refused request: the role, the endpoint's host (never a path
        or query that could hold a secret), the body field the server rejected and the config
        key that sets it."""
        spec = self.spec
        field = rejected_field(detail)
        key = config_key(spec.role, field, OWN_BODY_FIELDS, spec.extra_body)
        said = f"HTTP {status}" + (", the same request-validation error twice" if repeated else "")
        if field:
            said += f", rejects {field} ({f'set by {key}' if key else 'no config key sets it'})"
        where = f"models.{spec.role} ({spec.model} at {url_host(self._url)})"
        return RejectedRequest(f"{where}: {said}: {detail}", status, detail, field)

    def _scrub(self, text: str) -> str:
        """One line, at most 300 characters, never the key, a header value or the URL."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = " ".join(text.split())
        return text if len(text) <= 300 else text[:297] + "..."

    def _detail(self, exc: openai.APIStatusError) -> str:
        body = exc.body
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return self._scrub(body["message"])
        if isinstance(body, str) and body:
            return self._scrub(body)
        if isinstance(body, dict | list) and body:  # e.g. FastAPI's {"detail": [{"loc": ...}]}
            return self._scrub(json.dumps(body, ensure_ascii=False))
        return self._scrub(exc.response.reason_phrase or "error")


def chat_body(request: ChatRequest, spec: EndpointSpec) -> dict[str, Any]:
    """The ``/chat/completions`` body of ``request`` (also a Batch-API line's ``body``)."""
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": request.messages,
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
    }
    if spec.top_p is not None:
        body["top_p"] = spec.top_p
    seed = request.seed if request.seed is not None else spec.seed
    if seed is not None:
        body["seed"] = seed
    options = request.options()
    if "tools" not in options:
        options.pop("tool_choice", None)  # a tool choice goes with tools only
    body.update(options)
    if spec.extra_body:
        body.update(spec.extra_body)  # config refuses keys that would override the above
    return body


def completion_of(body: dict[str, Any], spec: EndpointSpec, tools: bool) -> Completion:
    """The :class:`Completion` of a chat completion ``body`` (a Batch-API output line's)."""
    text, model, tokens_in, tokens_out, cached_in = parse_completion(body)
    calls = parse_tool_calls(body) if tools else None
    return Completion(text, model or spec.model, tokens_in, tokens_out, 0, cached_in, calls)


def _from_env(variable: str | None, role: str, key: str) -> str | None:
    """The value of the environment variable a role names (None: it names none)."""
    if not variable:
        return None
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(
            f"environment variable {variable} (named by models.{role}.{key}) is not set"
        )
    return value


def _parse_json(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = content.decode("utf-8", "replace")
        raise MalformedReply(f"body is not JSON: {text}") from None
    if not isinstance(data, dict):
        raise MalformedReply(f"body is JSON {type(data).__name__}, not an object")
    if "error" in data and "choices" not in data and "data" not in data:
        raise MalformedReply(f"error body with status 200: {data['error']}")
    return data


def parse_completion(data: dict[str, Any]) -> tuple[str, str, int, int, int]:
    """Text, model and usage of a chat completion body: prompt tokens, completion tokens, and
    the prompt tokens the provider served from its own prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``; 0 where the endpoint does not say).

    Missing or null content is returned as ``""``: the reply exists but says nothing, and the
    caller records a parse failure rather than the gateway inventing text or retrying forever.
    A body without ``choices`` is malformed and retried. A ``reasoning_content`` (or
    ``reasoning``) field, where vLLM's ``--reasoning-parser`` puts the model's thinking, is never
    read: thinking is not the answer, and a reply with thinking only is an empty reply.
    """
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = content if isinstance(content, str) else ""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    model = data.get("model") if isinstance(data.get("model"), str) else ""
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    prompt = _int(usage.get("prompt_tokens"))
    return text, model, prompt, _int(usage.get("completion_tokens")), min(cached, prompt)


def parse_tool_calls(data: dict[str, Any]) -> list[dict[str, str]]:
    """The function calls of a chat completion body (``choices[0].message.tool_calls``) as
    ``[{"id", "name", "arguments"}]``, ``arguments`` the raw JSON string the model wrote (the
    gateway decodes it, so a malformed one is re-asked, not retried). A call that is not a
    function call with a name is malformed (retried like any malformed body)."""
    message = data["choices"][0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not calls:
        return []
    if not isinstance(calls, list):
        raise MalformedReply("tool_calls is not a list")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MalformedReply(f"tool call without a function name: {call!r}")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments if arguments is not None else {})
        out.append(
            {"id": str(call.get("id", "")), "name": function["name"], "arguments": arguments}
        )
    return out


def _usage(data: dict[str, Any]) -> int:
    """Prompt tokens of an /embeddings body (0 where the endpoint does not say)."""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return _int(usage.get("prompt_tokens"))


def parse_embeddings(data: dict[str, Any], expected: int) -> np.ndarray:
    """Vectors of an /embeddings body, in input order."""
    items = data.get("data")
    if not isinstance(items, list) or len(items) != expected:
        got = len(items) if isinstance(items, list) else "no"
        raise MalformedReply(f"expected {expected} embeddings, got {got}")
    try:
        ordered = sorted(items, key=lambda item: item["index"])
        matrix = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedReply(f"embedding items malformed ({exc})") from None
    if matrix.ndim != 2:
        raise MalformedReply("embeddings of differing lengths")
    return matrix


def parse_retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or
    as an HTTP date (RFC 9110 allows both); None when absent or unreadable."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
