"""What every generation stage is made of: a context, bounded validated asks, check-and-refine.

The reference generates an environment with three loops, and this module holds each once so the
stages stay short and their limits uniform:

- a JSON reply that fails its validator (wrong count, illegal value, unchanged value, ...) is asked
  again with the bad reply and the error shown to the model, at most ``max_validation_errors``
  replies in all (the reference stops at 4), then the stage fails;
- a generated text (an answer, a query) is checked by the model recovering what it should express,
  and refined from the check's outcome, at most ``max_refinements`` times (the reference: 20);
- a stage that cannot satisfy its validators raises :class:`StageFailed`: the user is reported as
  failed with that reason, never silently skipped (the reference's bare ``except`` skips it).

Transport errors are not validation failures: they propagate and fail the job, so a rerun resumes
(the gateway's cache holds every reply already received).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest, reply_json

#: Limits of the two loops (knobs of the same name override them).
MAX_VALIDATION_ERRORS = 4
MAX_REFINEMENTS = 20

#: The follow-up message after an invalid reply (the reference's wording, in substance).
RETRY = "Please try again to fix the error in your response: {error}"

_JSON_BLOCK = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class InvalidReply(ValueError):
    """A parsed reply breaks a stage's rule; the message is shown to the model on the re-ask."""


class StageFailed(RuntimeError):
    """A stage could not get a valid result within its limits; the user fails with ``reason``."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"stage {stage}: {reason}")
        self.stage = stage
        self.reason = reason


@dataclass
class StageLog:
    """What one stage of one user cost and went through (a row of the generation report)."""

    stage: str
    calls: int = 0  # model replies received, re-asks of unparseable replies included
    asks: int = 0  # validated asks (one per question put to the model)
    validation_failures: list[str] = field(default_factory=list)  # "task: error" per rejection
    refinements: int = 0
    reused: bool = False  # taken from a stage checkpoint, not recomputed

    def row(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "calls": self.calls,
            "asks": self.asks,
            "validation_failures": len(self.validation_failures),
            "failure_messages": list(self.validation_failures),
            "refinements": self.refinements,
            "reused": self.reused,
        }


@dataclass
class StageContext:
    """One stage's view of the run: the gateway, the knobs, and seeds tied to user and stage."""

    gateway: Gateway
    knobs: Mapping[str, Any]
    user: str  # the persona's key: seeds and messages name it
    seed: int
    log: StageLog

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by (run seed, user, stage, parts): a stage's random choices do not
        depend on which other stages ran, or were reused, before it."""
        key = ":".join(str(p) for p in (self.seed, self.user, self.log.stage, *parts))
        return random.Random(key)

    def limit(self, name: str, default: int) -> int:
        return int(self.knobs.get(name, default))


@dataclass(frozen=True)
class Stage:
    """One step of the chain. ``run(ctx, inputs)`` gets ``inputs[name]`` for every stage in
    ``needs`` (and ``"persona"``); its JSON-serializable result is checkpointed under a key of the
    values in ``knobs``, the bindings of ``roles``, its code and its inputs, so a config change
    re-runs exactly the stages it reaches."""

    name: str
    needs: tuple[str, ...]
    knobs: tuple[str, ...]
    roles: tuple[str, ...]
    run: Callable[[StageContext, dict[str, Any]], Awaitable[Any]]


def parse_json_reply(text: str) -> Any:
    """The first fenced ``json`` block of a reply, else the whole reply, as JSON."""
    match = _JSON_BLOCK.search(text)
    body = match.group(1) if match else text
    return reply_json(body.strip())


def refined_text(key: str) -> Callable[[Any], str]:
    """The validator of a refine reply ``{key: "non-empty text"}``: the text, stripped."""

    def validate(reply: Any) -> str:
        text = reply.get(key) if isinstance(reply, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f'the reply must be {{"{key}": "non-empty text"}}')
        return text.strip()

    return validate


def prompt_json(value: Any) -> str:
    """A value as the stage prompts show it: indented JSON, non-ASCII text kept as is."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def numbered_objects(reply: Any, key: str, noun: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of the reply's non-empty ``key`` list, numbered from 1 as the re-ask messages
    name them ("{noun} 2 is not an object"); checked one by one as the caller walks them."""
    items = reply.get(key) if isinstance(reply, dict) else None
    if not isinstance(items, list) or not items:
        raise InvalidReply(f'the reply must be an object with a non-empty "{key}" list')
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise InvalidReply(f"{noun} {number} is not an object")
        yield number, item


async def ask_validated(
    ctx: StageContext,
    *,
    role: str,
    task: str,
    prompt: str,
    fields: dict[str, Any],
    validate: Callable[[Any], Any],
) -> Any:
    """``validate(parsed JSON reply)``, re-asking with the error after an invalid reply; the
    request asks for a JSON object (``response_format``), which endpoints that support it honour.

    ``validate`` returns the stage's value or raises :class:`InvalidReply`. The re-ask shows the
    model its last reply and the error (and the offline backend gets ``fields["errors"]``, every
    error so far). After ``max_validation_errors`` invalid replies the stage fails.
    """
    limit = ctx.limit("max_validation_errors", MAX_VALIDATION_ERRORS)
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    errors: list[str] = []
    ctx.log.asks += 1
    while True:
        request = ChatRequest(
            role=role,
            task=task,
            messages=messages,
            fields={**fields, "errors": list(errors)},
            response_format={"type": "json_object"},
        )
        reply = await ctx.gateway.chat(request, parse=parse_json_reply)
        ctx.log.calls += reply.attempts
        if reply.parse_ok:
            try:
                return validate(reply.parsed)
            except InvalidReply as exc:
                error = str(exc)
        else:
            error = "the reply is not valid JSON"
        errors.append(error)
        ctx.log.validation_failures.append(f"{task}: {error}")
        if len(errors) >= limit:
            raise StageFailed(ctx.log.stage, f"{task}: {error} ({len(errors)} invalid replies)")
        messages = [
            messages[0],
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": RETRY.format(error=error)},
        ]


async def refine_until_checked(
    ctx: StageContext,
    *,
    what: str,
    draft: Any,
    check: Callable[[Any], Awaitable[str | None]],
    refine: Callable[[Any, str], Awaitable[Any]],
) -> Any:
    """``draft`` once ``check`` accepts it (returns ``None``), refined from each rejection.

    ``check(draft)`` returns ``None`` or what went wrong (e.g. "read as variant 3, not 1");
    ``refine(draft, problem)`` returns a new draft. After ``max_refinements`` refinements that
    still fail the check, the stage fails naming ``what``.
    """
    limit = ctx.limit("max_refinements", MAX_REFINEMENTS)
    refinements = 0
    while True:
        problem = await check(draft)
        if problem is None:
            return draft
        ctx.log.validation_failures.append(f"{what}: {problem}")
        if refinements >= limit:
            raise StageFailed(ctx.log.stage, f"{what}: {problem} after {limit} refinements")
        draft = await refine(draft, problem)
        refinements += 1
        ctx.log.refinements += 1


async def ask(
    ctx: StageContext,
    *,
    role: str,
    task: str,
    prompt: str,
    fields: dict[str, Any],
    parse: Callable[[str], Any] | None = None,
) -> Any:
    """One question whose reply ``parse`` accepts (a check's number, say): the parsed value, or
    ``None`` when still unparseable after the gateway's re-asks (the caller counts it as a
    failed check). Counted in the stage's log."""
    request = ChatRequest(
        role=role, task=task, messages=[{"role": "user", "content": prompt}], fields=fields
    )
    reply = await ctx.gateway.chat(request, parse=parse)
    ctx.log.calls += reply.attempts
    if not reply.parse_ok:
        ctx.log.validation_failures.append(f"{task}: unparseable reply")
        return None
    return reply.parsed if parse is not None else reply.text.strip()


@dataclass(frozen=True)
class Call:
    """One kind of model call a stage makes: the role that answers it, the task its requests carry
    (what the offline backend answers it by) and the template its prompt is formatted from, bound
    once beside the template so a task never goes out with another task's prompt."""

    role: str
    task: str
    template: str

    async def ask(
        self,
        ctx: StageContext,
        *,
        fields: dict[str, Any],
        validate: Callable[[Any], Any] | None = None,
        parse: Callable[[str], Any] | None = None,
        **values: Any,
    ) -> Any:
        """The template formatted with ``values``, asked until ``validate`` accepts the JSON
        reply when it is given (:func:`ask_validated`), else asked once and read by ``parse``
        (:func:`ask`)."""
        request = {"role": self.role, "task": self.task, "prompt": self.template.format(**values)}
        if validate is not None:
            return await ask_validated(ctx, **request, fields=fields, validate=validate)
        return await ask(ctx, **request, fields=fields, parse=parse)


async def gather_all(coroutines: list[Awaitable[Any]]) -> list[Any]:
    """Every result in order, run concurrently; the first failure cancels the rest and is raised
    as itself (a :class:`StageFailed` stays one, unlike a ``TaskGroup``'s exception group)."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
