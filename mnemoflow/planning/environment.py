"""AMemGym environments generated with a model (``generate: {method: llm}``), planned before
they exist (rule ``generate_user``, and the interactive jobs that will read the environment).

What a generator will be asked depends on what it answered before (the questions it wrote decide
the schema it is asked to unify, ...), so no prompt past the first can be rendered exactly. The
plan plays the stage chain instead for a few of the run's own personas with the embedded offline
backend in both generator roles, which answers every stage's task truthfully from its structured
fields (docs/environment.md), and counts each request it sends as the run would send it: input
tokens as the bound endpoint reports them, output tokens as the offline model replied for a
generator bound to it, else as every other line does
(:meth:`~mnemoflow.planning.static_qa.Context.tokens_out`). A ``generate_user`` job is planned as
the mean of the played users, an expected value: a real model's invalid replies (re-asked up to
``max_validation_errors`` times) and refinements (up to ``max_refinements``) add calls the offline
backend does not need, and its replies, hence later prompts, differ in length.

The played users also stand in for the environment itself (the same knobs: periods, sessions per
period, questions, choices), replicated to ``num_user_profiles``, so the dialogues, checkpoints
and upper bound of a run that generates its environment are planned too -- over that stand-in,
as their notes say.
"""

from __future__ import annotations

import asyncio
import copy
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from mnemoflow.data.amemgym import AmemUser, read_environment
from mnemoflow.environment.personas import personas_file, run_personas
from mnemoflow.environment.runner import Failure, generate_user
from mnemoflow.lexical import count_tokens
from mnemoflow.llm.gateway import Gateway, Reply
from mnemoflow.llm.types import ChatRequest
from mnemoflow.planning.plan import Line
from mnemoflow.planning.static_qa import Context
from mnemoflow.planning.tokens import sent_tokens

#: Personas played per benchmark: enough for a mean over users of different shapes, cheap
#: enough for a plan (about two seconds each on one core).
PLAYED_USERS = 3
GENERATOR_ROLES = ("generator_high", "generator_low")
NOT_KNOWN = "the benchmark's environment, still to be generated with a model"
STAND_IN = (
    "over a stand-in environment: {played} user(s) generated offline with the run's knobs, "
    "replicated to {users}"
)


class _Recorder(Gateway):
    """A gateway that keeps every request it is sent (the plan counts them)."""

    sent: list[ChatRequest]
    #: the offline model's completion tokens of each request sent
    replies: list[int]

    async def chat(self, request: ChatRequest, *args: Any, **kwargs: Any) -> Reply:
        self.sent.append(request)
        reply = await super().chat(request, *args, **kwargs)
        self.replies.append(count_tokens(reply.text))
        return reply


def knobs_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The generation knobs of a resolved benchmark spec (``resolved_benchmarks``)."""
    return {k: v for k, v in spec["generate"].items() if k not in ("method", "preset", "personas")}


class Played:
    """The chain played offline for a benchmark: per-user mean lines and the stand-in users."""

    def __init__(self, ctx: Context, benchmark: str):
        spec = ctx.benchmarks[benchmark]
        self.benchmark = benchmark
        self.knobs = knobs_of(spec)
        pool = run_personas(personas_file(spec["generate"], ctx.workdir), self.knobs)
        self.users = int(self.knobs["num_user_profiles"])
        personas = pool[: min(PLAYED_USERS, len(pool))]
        recorder = _Recorder.from_config({role: {"backend": "offline"} for role in GENERATOR_ROLES})
        recorder.sent, recorder.replies = [], []
        made, per_user = asyncio.run(self._play(recorder, personas))
        self.played = len(personas)
        self.lines = self._mean_lines(ctx, recorder, per_user)
        self.environment = self._stand_in(made) if made else None

    async def _play(self, gateway: Gateway, personas: list[dict[str, Any]]):
        made, counts = [], []
        async with gateway:
            with tempfile.TemporaryDirectory() as tmp:
                for index, persona in enumerate(personas):
                    before = len(gateway.sent)
                    user, _ = await generate_user(
                        gateway,
                        persona,
                        self.knobs,
                        int(self.knobs["seed"]),
                        Path(tmp) / str(index),
                    )
                    counts.append(len(gateway.sent) - before)
                    if not isinstance(user, Failure):
                        made.append(user)
        return made, counts

    def _mean_lines(self, ctx: Context, played: _Recorder, per_user: list[int]) -> list[Line]:
        n = max(1, len(per_user))
        totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for request, reply in zip(played.sent, played.replies, strict=True):
            backend = ctx.gateway.specs[request.role].backend
            entry = totals[(request.role, request.task)]
            entry[0] += 1
            entry[1] += sent_tokens(request.messages, backend)
            # a generator bound to the offline model replies as it did here; another one, as
            # its call site's expected reply length says
            entry[2] += (
                reply if backend == "offline" else ctx.tokens_out(request.role, request.task)
            )
        note = (
            f"expected: the mean of {n} user(s) generated offline with the run's knobs; a real "
            "model's re-asks and refinements add calls; the cache is not checked"
        )
        return [
            Line(
                self.benchmark, "-", "generate", role, task,
                calls=calls / n, tokens_in=tokens / n, tokens_out=out / n, exact=False,
                notes=[note],
            )
            for (role, task), (calls, tokens, out) in sorted(totals.items())
        ]  # fmt: skip

    def _stand_in(self, made: list[dict[str, Any]]) -> list[AmemUser]:
        users = []
        for index in range(self.users):
            user = copy.deepcopy(made[index % len(made)])
            user["id"] = f"{user['id']}-{index}"
            users.append(user)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "data.json"
            path.write_text(json.dumps(users, ensure_ascii=False), encoding="utf-8")
            return read_environment(path)

    @property
    def note(self) -> str:
        return STAND_IN.format(played=self.played, users=self.users)


def played(ctx: Context, benchmark: str) -> Played:
    """The benchmark's chain played once per plan."""
    if benchmark not in ctx.played:
        ctx.played[benchmark] = Played(ctx, benchmark)
    return ctx.played[benchmark]


def plan_generate_user(ctx: Context, benchmark: str) -> list[Line]:
    """One ``generate_user`` job: the played users' mean calls and tokens per role and task."""
    return [copy.deepcopy(line) for line in played(ctx, benchmark).lines]
