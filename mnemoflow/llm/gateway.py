"""The model gateway: every model call of every stage goes through one :class:`Gateway`.

Roles (agent, judge, user, memory_writer, embedder) are bound to endpoints in config. The gateway
looks up the shared response cache first, sends misses to the role's backend (the embedded offline
model or an OpenAI-compatible endpoint, which owns concurrency limits, rate limits and retries),
stores the reply, and counts everything in a :class:`~mnemoflow.llm.ledger.Ledger`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from mnemoflow.errors import ConfigError
from mnemoflow.llm.addresses import redact
from mnemoflow.llm.batch_mode import (
    PENDING,
    BatchPending,
    BatchStore,
    DrainCommand,
    Pending,
    Rounds,
    apply_counts,
    claim_collected,
    drain,
)
from mnemoflow.llm.cache import ResponseCache, cache_key
from mnemoflow.llm.context import current_item, fit
from mnemoflow.llm.endpoints import Address, hide_addresses, managed_name
from mnemoflow.llm.ledger import Ledger
from mnemoflow.llm.prefix_dispatch import PrefixDispatcher
from mnemoflow.llm.structured import form_name, ladder, refuses_structured_output
from mnemoflow.llm.types import (
    ROLE_DEFAULTS,
    ROLES,
    ChatRequest,
    Completion,
    EndpointError,
    EndpointSpec,
    ItemOverflow,
    RejectedRequest,
    Reply,
    UnparseableReply,
    resolved_spec,
)
from mnemoflow.prices import FREE_BACKENDS, price_table

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Set inside :meth:`Gateway.online` (why): a batch role's requests there are asked online.
_ONLINE: ContextVar[str | None] = ContextVar("mnemoflow_batch_online", default=None)

#: A caller's reply parser: the value it needs from the text, or raise ``UnparseableReply``.
Parser = Callable[[str], Any]

#: What a re-ask adds after the original messages (with the unparseable reply as an assistant
#: turn before it): a deterministic endpoint asked the identical messages again would most
#: likely repeat the identical reply, so the re-ask says what was wrong with it.
REASK_FOLLOWUP = (
    "Your reply could not be used: {problem}. Reply again, in exactly the format asked for."
)

#: The ``problem`` of an empty (or blank, or null) reply; its follow-up carries no assistant turn.
EMPTY_REPLY_PROBLEM = "it was empty"

_FOLLOWUP_HEAD, _, _FOLLOWUP_TAIL = REASK_FOLLOWUP.partition("{problem}")


def reask_messages(
    messages: list[dict[str, str]], previous: str, problem: str
) -> list[dict[str, str]]:
    """The messages of a re-ask: the original ones, the previous (unparseable) reply, and a
    short follow-up naming the parser's ``problem`` (an empty reply: that it was empty)."""
    if not previous.strip():
        return [*messages, _followup(EMPTY_REPLY_PROBLEM)]
    problem = " ".join(problem.split()).rstrip(".")[:200] or "it is not in the format asked for"
    return [*messages, {"role": "assistant", "content": previous}, _followup(problem)]


def original_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """``messages`` without a trailing re-ask (the inverse of :func:`reask_messages`), so a test
    endpoint can answer and count a re-ask as another attempt at the original prompt."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    if not (
        last.get("role") == "user"
        and isinstance(content, str)
        and content.startswith(_FOLLOWUP_HEAD)
        and content.endswith(_FOLLOWUP_TAIL)
    ):
        return messages
    if content == _followup(EMPTY_REPLY_PROBLEM)["content"]:
        return messages[:-1]
    if len(messages) >= 2 and messages[-2].get("role") == "assistant":
        return messages[:-2]
    return messages


def _followup(problem: str) -> dict[str, str]:
    return {"role": "user", "content": REASK_FOLLOWUP.format(problem=problem)}


_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def strip_reasoning(text: str) -> str:
    """The reply without the model's thinking (``models.<role>.strip_reasoning``).

    - a leading ``<think>...</think>`` block (after any whitespace) is removed, with the
      whitespace after it: what follows is the answer;
    - a leading ``<think>`` that is never closed (the thinking ran into ``max_tokens``) is all
      thinking: the reply is ``""``, which no parser accepts, so it is re-asked and, failing
      that, counted as a parse failure, never scored on a draft;
    - a ``</think>`` with no ``<think>`` before it (chat templates that open the block in the
      prompt, as Qwen3's thinking-only and DeepSeek-R1's do) ends the thinking too;
    - anything else is returned unchanged. Only the thinking at the start is removed: a
      ``<think>`` later in an answer is the answer's text.
    """
    head = text.lstrip()
    if head.startswith(_THINK_OPEN):
        end = head.find(_THINK_CLOSE)
        return "" if end < 0 else head[end + len(_THINK_CLOSE) :].lstrip()
    close = text.find(_THINK_CLOSE)
    if close >= 0 and _THINK_OPEN not in text[:close]:
        return text[close + len(_THINK_CLOSE) :].lstrip()
    return text


def rejects_structured_output(exc: BaseException) -> bool:
    """Whether ``exc`` is an endpoint refusing the request's form of ``response_format``: a 4xx
    whose message names it (a JSON schema / object, guided decoding, structured output, a
    grammar), or a 5xx request-validation error naming it (llama-cpp-python's server)."""
    return isinstance(exc, RejectedRequest) and refuses_structured_output(exc.status, exc.detail)


def require_text(text: str) -> str:
    """The default parser: any non-blank reply. A null or empty completion is a failure."""
    if not text or not text.strip():
        raise UnparseableReply("empty reply")
    return text


def require_reply(text: str) -> str:
    """The default parser of a request with ``tools`` whose reply called none: any non-blank
    text (a reply with function calls is checked by :func:`decode_tool_calls` instead)."""
    return require_text(text)


def decode_tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{"id", "name", "arguments"}]`` with each call's ``arguments`` decoded from its JSON
    string into an object; a call without a name, or whose arguments are not a JSON object, is
    an unparseable reply (re-asked like any other)."""
    decoded = []
    for call in calls:
        name, arguments = call.get("name"), call.get("arguments")
        if not isinstance(name, str) or not name:
            raise UnparseableReply("a tool call has no function name")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise UnparseableReply(
                    f"the arguments of tool call {name!r} are not valid JSON: {exc.msg}"
                ) from None
        if not isinstance(arguments, dict):
            raise UnparseableReply(f"the arguments of tool call {name!r} are not a JSON object")
        decoded.append({"id": call.get("id", ""), "name": name, "arguments": arguments})
    return decoded


def offline_version(task: str | None) -> str:
    """The offline model's identity in the cache key: derived from the source of the code that
    answers ``task`` (``None``: embeddings), so a changed heuristic is a cache miss."""
    from mnemoflow.llm.offline import identity

    return identity(task)


def embedder_identity(spec: EndpointSpec) -> str:
    """The embedding model's identity in the cache key. A local model is named by a folder (or
    the package that bundles one) whose files can change under the same name, so its identity
    is a digest of the files' contents; a remote model is known only by its name."""
    if spec.backend == "offline":
        return offline_version(None)
    if spec.backend == "sentence_transformers":
        from mnemoflow.llm.local_embedder import model_folder

        return f"{spec.model}@{_folder_digest(model_folder(spec.model).resolve())}"
    return spec.model


def _folder_digest(folder: Path) -> str:
    """sha256 of every file's relative path and contents; computed once per process and set
    of (path, size, mtime), so a job pays for it once (about 0.3 s for all-MiniLM-L6-v2)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    if stamp not in _FOLDER_DIGESTS:
        digest = hashlib.sha256()
        for path in files:
            digest.update(f"{path.relative_to(folder)}\0".encode())
            with open(path, "rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        _FOLDER_DIGESTS[stamp] = digest.hexdigest()[:16]
    return _FOLDER_DIGESTS[stamp]


_FOLDER_DIGESTS: dict[tuple, str] = {}


#: The text of the cache record that marks a request whose ``response_format`` was rejected.
_REJECTED = "response_format rejected by the endpoint"


def _rejection_key(key: str) -> str:
    """Where the cache marks that the request under ``key`` was refused its response_format."""
    return cache_key({"structured_output_rejected": key})


def _endpoint(spec: EndpointSpec) -> tuple[str, str, str]:
    return (spec.backend, (spec.base_url or "").strip().rstrip("/"), spec.model)


class Backend(Protocol):
    """What a backend provides; one instance serves one role's endpoint."""

    async def complete(self, request: ChatRequest, spec: EndpointSpec) -> Completion: ...

    async def embed(self, texts: list[str], spec: EndpointSpec) -> np.ndarray: ...

    async def aclose(self) -> None: ...


def make_backend(spec: EndpointSpec, limit: dict[str, Any] | None = None) -> Backend:
    """Instantiate the backend a spec names (imports are lazy: offline runs need no client).

    ``limit`` (a job's share of the endpoint, :mod:`mnemoflow.llm.limits`) replaces the role's own
    concurrency and rate for an openai backend; roles given the same dict share one limit.
    """
    if spec.backend == "offline":
        from mnemoflow.llm.offline import OfflineBackend

        return OfflineBackend()
    if spec.backend == "openai":
        from mnemoflow.llm.openai_backend import OpenAIBackend, SharedLimit

        if limit is None:
            return OpenAIBackend(spec)
        if "shared" not in limit:
            limit["shared"] = SharedLimit(limit["concurrency"], limit.get("requests_per_minute"))
        return OpenAIBackend(spec, limit["shared"])
    if spec.backend == "sentence_transformers":
        from mnemoflow.llm.local_embedder import LocalEmbedder

        return LocalEmbedder(spec)
    raise ConfigError(f"config models.{spec.role}.backend: unknown backend {spec.backend!r}")


class Gateway:
    """Role-bound, cached, ledgered access to models."""

    def __init__(
        self,
        specs: dict[str, EndpointSpec],
        cache_path: str | Path | None = None,
        limits: dict[str, dict[str, Any]] | None = None,
        unbound: tuple[str, ...] = (),
        prices: dict[str, Any] | None = None,
        addresses: dict[str, Address] | None = None,
        on_close: tuple[Callable[[], None], ...] = (),
        drain_command: DrainCommand | None = None,
    ):
        """``prices``: the config's ``prices:`` entries, merged over the shipped table for the
        ledger's ``usd`` (:mod:`mnemoflow.prices`). ``addresses``: where each managed endpoint
        (``endpoint://NAME``) runs for this job; ``on_close``: called once when it is closed
        (the job's hold on those endpoints). ``drain_command``: runs an endpoint's
        ``run_batch`` command elsewhere (a SLURM job of its own; None: in this job)."""
        for role, fallback in ROLE_DEFAULTS.items():
            if specs.get(role) is None and specs.get(fallback) is not None:
                # Batch-API mode is the fallback's own (its jobs collect its requests)
                inherited = dataclasses.replace(specs[fallback], role=role, batch=False)
                specs = {**specs, role: inherited}
        self.addresses = dict(addresses or {})
        # specs hold redacted addresses (what ledgers and logs may show); the real ones are here
        self.specs = hide_addresses(
            {role: specs.get(role) or EndpointSpec(role=role) for role in ROLES}, self.addresses
        )
        # base_url -> this job's share of that endpoint (from the workflow; None: per-role limits).
        # Addresses that name one resource (one endpoint spelled two ways) share one limit, as
        # the scheduler counts one share for them.
        by_resource: dict[str, dict[str, Any]] = {}
        self.limits = {
            redact(url.strip().rstrip("/")): by_resource.setdefault(
                limit.get("resource", url), dict(limit)
            )
            for url, limit in (limits or {}).items()
        }
        #: Roles this job was not given (its params do not carry their binding): using one is an
        #: error, never a silent fall-back to the default binding.
        self.unbound = frozenset(unbound)
        self.cache = ResponseCache(cache_path)
        self.ledger = Ledger(price_table(prices))
        self._backends: dict[str, Backend] = {}
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        #: (backend, base_url, model) -> the forms of ``response_format`` it refused / took
        #: (``llm.structured.FORMS``); ``structured_output: auto`` learns each once per job.
        self._refused: dict[tuple[str, str, str], set[str]] = {}
        self._taken: dict[tuple[str, str, str], set[str]] = {}
        self._probe_locks: dict[tuple[str, str, str], tuple[Any, asyncio.Lock]] = {}
        #: role -> (event loop, the dispatcher of its requests) with ``prefix_dispatch``
        self._dispatchers: dict[str, tuple[Any, PrefixDispatcher]] = {}
        self._on_close = list(on_close)
        self.drain_command = drain_command
        #: Batch-API mode's state while :meth:`batched` runs (None: requests go online)
        self._rounds: Rounds | None = None
        self._counted: set[str] = set()  # batch replies the current pass has counted

    @classmethod
    def from_config(
        cls,
        models: dict[str, Any] | None,
        cache_path: str | Path | None = None,
        limits: dict[str, dict[str, Any]] | None = None,
        only_given: bool = False,
        prices: dict[str, Any] | None = None,
        addresses: dict[str, Address] | None = None,
        on_close: tuple[Callable[[], None], ...] = (),
        drain_command: DrainCommand | None = None,
    ) -> Gateway:
        """``only_given``: the roles absent from ``models`` are unbound (see ``unbound``), except a
        role whose fallback (``ROLE_DEFAULTS``: an unbound critic takes the judge's binding) is
        given."""
        models = dict(models or {})
        unknown = sorted(set(models) - set(ROLES))
        if unknown:
            raise ConfigError(f"config models: unknown roles {unknown}; roles are {list(ROLES)}")
        specs = {role: resolved_spec(models, role) for role in ROLES}
        given = {r for r in ROLES if r in models or ROLE_DEFAULTS.get(r) in models}
        unbound = tuple(r for r in ROLES if r not in given) if only_given else ()
        return cls(
            specs,
            cache_path,
            limits,
            unbound=unbound,
            prices=prices,
            addresses=addresses,
            on_close=on_close,
            drain_command=drain_command,
        )

    def _check_bound(self, role: str) -> None:
        if role in self.unbound:
            raise ConfigError(
                f"role {role!r} is not bound in this job: its rule does not pass it (RULE_ROLES "
                "in rules/common.smk, or ingest_roles / query_roles of the MemorySystem class)"
            )

    def backend(self, role: str) -> Backend:
        if role not in self._backends:
            spec = self.specs[role]
            url = (spec.base_url or "").strip().rstrip("/")
            limit = self.limits.get(url)
            if managed_name(url) is not None or url in self.addresses:
                spec = dataclasses.replace(spec, base_url=self._address(role, url).url)
            self._backends[role] = make_backend(spec, limit)
        return self._backends[role]

    def endpoint_url(self, role: str) -> str:
        """The address the role's requests go to (a managed endpoint's, or ``base_url_env``'s)."""
        spec = self.specs[role]
        url = (spec.base_url or "").strip().rstrip("/")
        if spec.base_url_env:
            return os.environ[spec.base_url_env]
        return self._address(role, url).url if url in self.addresses else url

    def _address(self, role: str, url: str) -> Address:
        if url not in self.addresses:
            raise ConfigError(
                f"config models.{role}.endpoint: {managed_name(url)!r} is a managed endpoint and "
                "this job was given no address for it (it runs inside the workflow)"
            )
        return self.addresses[url]

    def _why_down(self, role: str) -> str | None:
        """For a role on a managed endpoint whose call failed: one line naming the endpoint and
        its log when the server is gone (None: it runs, the failure is the call's own)."""
        url = (self.specs[role].base_url or "").strip().rstrip("/")
        address = self.addresses.get(url)
        return address.down() if address is not None else None

    def model_name(self, role: str) -> str:
        return self.specs[role].model

    def sent_key(self, request: ChatRequest) -> str:
        """The cache key of ``request`` as :meth:`_attempt` would send it: without its
        ``response_format`` where the role's ``structured_output`` is ``off``; with ``auto``, in
        the strongest form the cache does not record as rejected (what a planner looks up
        before a run)."""
        fixed = self._configured_form(request)
        if fixed is not None:
            return self.request_key(fixed)
        return self.request_key(self._next_form(request, 0, learn=False)[0])

    def _configured_form(self, request: ChatRequest) -> ChatRequest | None:
        """``request`` as it is sent where the role's ``structured_output`` decides alone (no
        ``response_format``, or ``on``: unchanged; ``off``: without it); ``None`` for ``auto``,
        where the endpoint decides (:meth:`_attempt`)."""
        spec = self.specs[request.role]
        if request.response_format is None or spec.structured_output == "on" or spec.batch:
            return request  # a batch cannot probe: Batch-API mode sends it as asked
        if spec.structured_output == "off":
            return dataclasses.replace(request, response_format=None)
        return None

    def request_key(self, request: ChatRequest, attempt: int = 0) -> str:
        """Cache key: backend, model, messages, sampling parameters, seed, response format (the
        offline model: also its code's fingerprint, the task and the fields); never the API key.

        ``attempt`` > 0 is a re-ask after an unparseable reply (its messages carry that reply and
        the follow-up): a distinct entry, so the first reply stays stored and a rerun replays the
        same sequence of attempts from the cache.
        """
        spec = self.specs[request.role]
        sampling = spec.sampling()
        if request.seed is not None:
            sampling["seed"] = request.seed
        payload: dict[str, Any] = {
            "backend": spec.backend,
            "model": spec.model,
            "messages": request.messages,
            "sampling": sampling,
        }
        if spec.backend == "offline":
            # The offline model reads the structured fields, so they determine its reply.
            payload["model"] = offline_version(request.task)
            payload["task"] = request.task
            payload["fields"] = request.fields
        payload.update(request.options())
        if spec.extra_body:
            payload["extra_body"] = spec.extra_body
        if attempt:
            payload["parse_attempt"] = attempt
        return cache_key(payload)

    async def chat(self, request: ChatRequest, parse: Parser | None = None) -> Reply:
        """One chat completion whose reply ``parse`` accepts (default: any non-empty text).

        A reply the parser rejects (``UnparseableReply`` or ``ValueError``) is never final: the
        request is asked again, up to the role's ``max_parse_retries``, each attempt under its own
        cache key. The first attempt sends the caller's messages unchanged; a re-ask sends them
        followed by the rejected reply and a follow-up naming the parser's complaint
        (:func:`reask_messages`), since a deterministic endpoint would repeat itself if asked the
        same thing. ``task`` and ``fields`` stay the same (the offline model reads those, and its
        answer does not change). Every raw reply is cached and returned in ``raw_replies``; a
        cached reply is parsed again on a rerun (so a fixed parser takes effect without new
        calls). What still does not parse after the last attempt comes back with
        ``parse_ok=False`` and is counted as a parse failure in the ledger: the caller scores it
        as a failure, never as a guess.

        A prompt that does not fit the role's context window is cut or refused before anything
        is sent (``models.<role>.overflow``, :func:`mnemoflow.llm.context.fit`); a re-ask, which
        adds the rejected reply and the follow-up, is checked again (its own prompt kept whole).
        """
        if request.role not in self.specs:
            raise ConfigError(f"unknown role {request.role!r}; roles are {list(ROLES)}")
        self._check_bound(request.role)
        spec = self.specs[request.role]
        try:
            request, dropped = fit(request, spec)
        except ItemOverflow as exc:
            return self._not_sent(request, exc)
        if dropped:
            item = current_item() or "(unnamed)"
            self.ledger.record_truncation(request.role, request.task, item, dropped)
        if parse is None:
            parse = require_text if request.tools is None else require_reply
        retries = spec.max_parse_retries
        if request.max_parse_retries is not None:
            retries = request.max_parse_retries
        raw: list[str] = []
        started = time.perf_counter()
        reply: Reply | None = None
        asked = request
        for attempt in range(retries + 1):
            if attempt:
                self.ledger.record_reask(request.role, request.task)
            try:
                reply = await self._attempt(asked, attempt)
            except BatchPending:  # this pass is thrown away; the next has the batch's reply
                model = spec.model
                return Reply("", model, 0, 0, 0.0, cache_hit=False, parse_ok=False, failure=PENDING)
            raw.extend(reply.raw_replies)
            try:
                if reply.tool_calls:
                    # The model called functions: their arguments are what must parse.
                    parsed = reply.tool_calls = decode_tool_calls(reply.tool_calls)
                else:
                    parsed = parse(reply.text)
            except ValueError as exc:  # UnparseableReply is a ValueError, so are json errors
                shown = reply.text
                if reply.tool_calls and not shown.strip():  # show the calls that did not parse
                    shown = json.dumps(reply.tool_calls, ensure_ascii=False)
                messages = reask_messages(request.messages, shown, str(exc))
                asked = dataclasses.replace(request, messages=messages)
                keep = len(messages) - len(request.messages) + 1  # the prompt and the re-ask
                try:
                    asked, _ = fit(asked, spec, keep_last=keep)
                except ItemOverflow:  # no room for a re-ask: the reply stays unparseable
                    break
                continue
            reply.parsed, reply.attempts, reply.raw_replies = parsed, attempt + 1, raw
            reply.latency_s = time.perf_counter() - started
            return reply
        assert reply is not None
        self.ledger.record_parse_failure(request.role, request.task)
        reply.parsed, reply.parse_ok, reply.attempts, reply.raw_replies = None, False, len(raw), raw
        reply.latency_s = time.perf_counter() - started
        return reply

    def _not_sent(self, request: ChatRequest, exc: ItemOverflow) -> Reply:
        """A prompt over the context window (``overflow: fail``): its item fails, counted and
        named in the ledger, and the run goes on (``overflow: abort`` stops it instead)."""
        item = current_item() or "(unnamed)"
        self.ledger.record_overflow_failure(request.role, request.task, item, str(exc))
        log.warning("%s; this item fails, the run goes on", exc)
        model = self.specs[request.role].model
        return Reply(
            "", model, 0, 0, 0.0, cache_hit=False, parse_ok=False, attempts=0, failure=str(exc)
        )

    async def _attempt(self, request: ChatRequest, attempt: int) -> Reply:
        """One attempt, with the request's ``response_format`` in the form the role's
        ``structured_output`` says: ``on`` sends it, ``off`` drops it, ``auto`` sends the
        strongest form the endpoint takes (:func:`mnemoflow.llm.structured.ladder`: json_schema,
        then json_object carrying the schema, then none), stepping down one form per refusal
        and remembering each refusal for the rest of the job. A reply is cached under the form
        that produced it; a refusal leaves a marker under the key of the refused form, so a
        rerun walks the same steps from the cache and makes no call."""
        fixed = self._configured_form(request)
        if fixed is not None:
            reply = await self._complete(fixed, attempt)
            self._record_form(request, fixed)
            return reply
        endpoint = _endpoint(self.specs[request.role])
        while True:
            form, settled = self._next_form(request, attempt)
            if settled:
                reply = await self._complete(form, attempt)
                break
            # One request finds out whether the endpoint takes the form; the others wait for it.
            async with self._probe_lock(endpoint):
                form, settled = self._next_form(request, attempt)
                probed = None if settled else await self._probe(form, attempt, endpoint)
            if probed is not None:
                reply = probed
                break
            if settled:
                reply = await self._complete(form, attempt)
                break
        self._mark_refused(request, form, attempt, endpoint)
        self._record_form(request, form)
        return reply

    def _forms(self, request: ChatRequest) -> list[ChatRequest]:
        return [
            dataclasses.replace(request, response_format=f) for f in ladder(request.response_format)
        ]

    def _next_form(
        self, request: ChatRequest, attempt: int, learn: bool = True
    ) -> tuple[ChatRequest, bool]:
        """The form to send ``request`` in, and whether it is settled (its reply is cached, the
        endpoint took it before, or it is the last form) rather than to be tried: the first form
        of the ladder neither refused in this job nor marked refused in the cache. ``learn``:
        a marker found counts as the endpoint's refusal (a planner only looks)."""
        endpoint = _endpoint(self.specs[request.role])
        forms = self._forms(request)
        for form in forms[:-1]:
            name = form_name(form.response_format)
            key = self.request_key(form, attempt)
            if self.cache.get(key) is not None:
                return form, True
            if name in self._refused.get(endpoint, ()):
                continue
            if self.cache.get(_rejection_key(key)) is not None:
                if learn:
                    self._learn_refused(form, endpoint, "as the cache records")
                continue
            return form, name in self._taken.get(endpoint, ())
        return forms[-1], True

    async def _probe(self, form: ChatRequest, attempt: int, endpoint: tuple) -> Reply | None:
        """The first request of the job in ``form`` to an endpoint not known to take it: its
        reply, or ``None`` when the endpoint refuses the form (learnt, and marked in the cache)."""
        try:
            reply = await self._complete(form, attempt, probing=True)
        except RejectedRequest as exc:
            if not rejects_structured_output(exc):
                raise
            self._learn_refused(form, endpoint, f"(HTTP {exc.status}: {exc.detail})")
            self.cache.put(
                _rejection_key(self.request_key(form, attempt)),
                Completion(_REJECTED, self.specs[form.role].model),
            )
            return None
        self._taken.setdefault(endpoint, set()).add(form_name(form.response_format))
        return reply

    def _mark_refused(
        self, request: ChatRequest, sent: ChatRequest, attempt: int, endpoint: tuple
    ) -> None:
        """Marks, under this request's keys, the stronger forms it was not sent in because the
        endpoint refused them, so that a rerun steps down the same way from the cache."""
        for form in self._forms(request):
            if form.response_format == sent.response_format:
                return
            if form_name(form.response_format) not in self._refused.get(endpoint, ()):
                continue
            marker = _rejection_key(self.request_key(form, attempt))
            if self.cache.get(marker) is None:
                self.cache.put(marker, Completion(_REJECTED, self.specs[form.role].model))

    def _record_form(self, request: ChatRequest, sent: ChatRequest) -> None:
        if request.response_format is not None:
            self.ledger.record_structured_form(request.role, form_name(sent.response_format))

    def _learn_refused(self, form: ChatRequest, endpoint: tuple, why: str) -> None:
        name = form_name(form.response_format)
        refused = self._refused.setdefault(endpoint, set())
        if name in refused:
            return
        refused.add(name)
        self.ledger.record_structured_fallback(form.role, form.task)
        spec = self.specs[form.role]
        forms = [form_name(f.response_format) for f in self._forms(form)]
        log.warning(
            "models.%s (%s at %s) refuses response_format %s %s; asking with %s for the rest of "
            "this job (models.%s.structured_output: auto; 'off' never sends a response_format)",
            spec.role,
            spec.model,
            redact(spec.base_url),
            name,
            why,
            forms[1] if len(forms) > 1 else "none",
            spec.role,
        )

    def _probe_lock(self, endpoint: tuple) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        held = self._probe_locks.get(endpoint)
        if held is None or held[0] is not loop:
            held = self._probe_locks[endpoint] = (loop, asyncio.Lock())
        return held[1]

    async def _complete(self, request: ChatRequest, attempt: int, probing: bool = False) -> Reply:
        """One attempt through the cache; concurrent identical requests share one call.
        ``probing``: a rejected ``response_format`` is the caller's to handle, not an error."""
        key = self.request_key(request, attempt)
        started = time.perf_counter()
        while True:
            cached = self.cache.get(key)
            if cached is not None:
                if self._rounds is not None and key in self._rounds.fresh:
                    return self._fresh_reply(request, key, started)
                return self._reply(request, cached, started, cache_hit=True)
            pending = self._inflight.get(key)
            if pending is None:
                break
            try:
                completion = await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and task is not None and not task.cancelling():
                    continue  # the caller that owned the call was cancelled, not us: take over
                raise
            return self._reply(request, completion, started, cache_hit=True)
        spec = self.specs[request.role]
        # a re-ask of an unparseable reply goes into the next batch, or online (batch_fallback)
        if (
            spec.batch
            and not (attempt and spec.batch_fallback == "online")
            and _ONLINE.get() is None
        ):
            self._collect(request, key)  # raises BatchPending
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            completion = await self._send(request, key)
        except asyncio.CancelledError:
            future.cancel()  # waiters take over (above); a cancellation is not an endpoint error
            raise
        except Exception as exc:
            if not (probing and rejects_structured_output(exc)):
                self.ledger.record_error(request.role, request.task)
            down = self._why_down(request.role) if isinstance(exc, EndpointError) else None
            if down:
                exc = EndpointError(down)
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it, nobody else must
            if down:
                raise exc from None
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(completion)
        self.cache.put(key, completion)
        if self._rounds is not None:  # a later pass counts this call, not a cache hit
            self._rounds.fresh[key] = (None, completion)
            self._counted.add(key)
        return self._reply(request, completion, started, cache_hit=False)

    def _send(self, request: ChatRequest, key: str) -> Awaitable[Completion]:
        """Ask the role's backend; with ``prefix_dispatch`` once the dispatcher releases it."""
        spec = self.specs[request.role]
        backend = self.backend(request.role)
        if not (spec.prefix_dispatch and spec.backend == "openai"):
            return backend.complete(request, spec)
        loop = asyncio.get_running_loop()
        held = self._dispatchers.get(request.role)
        if held is None or held[0] is not loop:
            share = self.limits.get((spec.base_url or "").strip().rstrip("/"), {})
            limit = min(spec.concurrency, share.get("concurrency") or spec.concurrency)
            held = self._dispatchers[request.role] = (loop, PrefixDispatcher(limit))
        return held[1].send(request.messages, key, lambda: backend.complete(request, spec))

    # ---- Batch-API mode (llm/batch_mode.py) ---------------------------------------------------

    async def batched(self, produce: Callable[[], Awaitable[T]]) -> T:
        """``produce()``'s result, its batch roles' requests sent in Batch-API mode: passes
        until one collects nothing (:mod:`mnemoflow.llm.batch_mode`); that pass's result and
        ledger (added to what the job counted before) are the job's. Without a batch role:
        ``produce()`` once."""
        if not any(spec.batch for spec in self.specs.values()):
            return await produce()
        rounds = Rounds(BatchStore.beside(self.cache.directory))
        claimed = claim_collected(self, rounds)
        before = self.ledger.copy()  # the job's calls before this part (a feedback step's talk)
        self._rounds = rounds
        try:
            while True:
                self.ledger = before.copy()
                self._counted = set()
                result = await produce()
                if not rounds.pending:
                    apply_counts(rounds, self.ledger.entries)
                    for record in claimed:  # counted in this job's ledger, never again
                        rounds.store.save({**record, "uncounted": False})
                    return result
                await drain(self, rounds)
        finally:
            self._rounds = None

    @property
    def collecting(self) -> bool:
        """Whether this Batch-API pass has collected requests: its results are thrown away, so
        a caller may skip what failed for want of their replies (the next pass has them)."""
        return self._rounds is not None and bool(self._rounds.pending)

    @contextlib.contextmanager
    def online(self, why: str) -> Iterator[None]:
        """Inside, a batch role's requests are asked online: those of a part of the job whose
        next request depends on their reply (``why``), such as the judge that scores each turn
        of a MemoryBench dialogue for the rule-based simulated user. Counted as online calls."""
        batch = sorted(role for role, spec in self.specs.items() if spec.batch)
        if batch:
            log.info("Batch-API mode: %s asked online while %s", ", ".join(batch), why)
        token = _ONLINE.set(why)
        try:
            yield
        finally:
            _ONLINE.reset(token)

    def _collect(self, request: ChatRequest, key: str) -> None:
        """A batch role's cache miss: collected for the pass's batch (raises BatchPending)."""
        from mnemoflow.llm.openai_backend import chat_body

        if self._rounds is None:
            raise ConfigError(
                f"config models.{request.role}.batch: Batch-API mode runs where a job's requests "
                f"do not depend on each other's replies (static-QA answer and judge, the feedback "
                f"family's scoring); this job asks {request.role} ({request.task}) turn by turn: "
                "set batch: false"
            )
        spec = self.specs[request.role]
        self._rounds.pending.setdefault(key, Pending(key, request, chat_body(request, spec)))
        raise BatchPending(key)

    def _fresh_reply(self, request: ChatRequest, key: str, started: float) -> Reply:
        """A reply this job got in an earlier pass: counted once per pass as the call it was
        (through a batch: at batch prices), then as a cache hit."""
        assert self._rounds is not None
        batch_id, completion = self._rounds.fresh[key]
        if key in self._counted:
            return self._reply(request, completion, started, cache_hit=True)
        self._counted.add(key)
        if batch_id is None:
            return self._reply(request, completion, started, cache_hit=False)
        spec = self.specs[request.role]
        self.ledger.record_batch(
            request.role,
            request.task,
            model=completion.model,
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
            batch_id=batch_id,
            priced_as=None if spec.backend in FREE_BACKENDS else spec.model,
        )
        reply = self._reply(request, completion, started, cache_hit=True, record=False)
        reply.cache_hit = False
        return reply

    def _reply(
        self,
        request: ChatRequest,
        completion: Completion,
        started: float,
        cache_hit: bool,
        record: bool = True,
    ) -> Reply:
        latency = time.perf_counter() - started
        spec = self.specs[request.role]
        if record:
            self.ledger.record(
                request.role,
                request.task,
                model=completion.model,
                cache_hit=cache_hit,
                tokens_in=completion.tokens_in,
                tokens_out=completion.tokens_out,
                latency_s=latency,
                retries=0 if cache_hit else completion.retries,
                cached_in=completion.cached_in,
                priced_as=None if spec.backend in FREE_BACKENDS else spec.model,
            )
        text = completion.text
        if self.specs[request.role].strip_reasoning:
            text = strip_reasoning(text)
        return Reply(
            text=text,
            model=completion.model,
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
            latency_s=latency,
            cache_hit=cache_hit,
            raw_replies=[completion.text],
            tool_calls=list(completion.tool_calls or []),
        )

    async def embed(self, texts: list[str], role: str = "embedder") -> np.ndarray:
        """Embed texts, computing each distinct text once across calls, jobs and reruns."""
        self._check_bound(role)
        spec = self.specs[role]
        model = embedder_identity(spec)
        extra = {"extra_body": spec.extra_body} if spec.extra_body else {}
        keys = [
            cache_key({"embed": model, "backend": spec.backend, "text": t, **extra}) for t in texts
        ]
        started = time.perf_counter()
        found = self.cache.get_vectors(sorted(set(keys)))
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        usage: list[int] = []
        if missing:
            backend = self.backend(role)
            try:
                if spec.backend == "openai":  # it reports the prompt tokens of each batch
                    vectors = await backend.embed(list(missing.values()), spec, usage=usage)
                else:
                    vectors = await backend.embed(list(missing.values()), spec)
            except Exception as exc:
                self.ledger.record_error(role, "embed")
                down = self._why_down(role) if isinstance(exc, EndpointError) else None
                if down:
                    raise EndpointError(down) from None
                raise
            computed = dict(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
            self.cache.put_vectors(computed)
            found.update(computed)
        self.ledger.record_embeddings(
            role,
            model=spec.model,
            texts=len(texts),
            computed=len(missing),
            tokens_in=sum(usage),
            latency_s=time.perf_counter() - started,
            priced_as=None if spec.backend in FREE_BACKENDS else spec.model,
        )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[key] for key in keys])

    def record_parse_failure(self, role: str, task: str) -> None:
        """For callers that judge a parsed reply unusable on grounds the parser could not see."""
        self.ledger.record_parse_failure(role, task)

    def describe(self) -> dict[str, Any]:
        """Role bindings as they may appear in results (no key, no key variable)."""
        return {role: spec.public() for role, spec in self.specs.items()}

    async def aclose(self) -> None:
        try:
            for backend in self._backends.values():
                await backend.aclose()
            self._backends.clear()
        finally:  # a managed endpoint's lease is released even when a client fails to close
            while self._on_close:
                self._on_close.pop()()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """``async with gateway:`` closes the endpoints' clients however the block ends."""
        await self.aclose()

    def close(self) -> None:
        self.cache.close()
