"""The interactive protocols' calls (AMemGym: rules dialogues, replay_dialogues, upper_bound).

From the environment (the generated ``data.json`` when it exists, the procedural generator run in
process -- it calls no model --, or ``source.path``); for an environment still to be generated
with a model (``generate: {method: llm}``), over the stand-in users of its chain played offline
(:mod:`mnemoflow.planning.environment`), as the lines' notes say.

Per (benchmark, system, protocol, period, shard), over the shard's users that have the period:

- on-policy conversation (``interactive`` only): every session has the schedule's rounds
  (AMemGym's simulated user never ends early, so min = expected = max): ``agent`` one reply per
  round, ``user`` one message between rounds;
- checkpoint and recall: one ``agent`` request per question each;
- a memory that writes with a model: ``memory_writer`` about one call per ``update_batch``
  messages (expected); a self-evolving one: one evolution call per checkpoint (expected);
- upper bound (once per benchmark): one ``agent`` request per (user, question, option), rendered
  exactly as the protocol renders it, so its cache keys are looked up.

Only the upper bound's prompts are rendered: the others hold the agent's memory or the dialogue so
far, which exist only once the models have spoken. Their ``tokens_in`` is the part known before
(the session's opening message, the question and its options): a lower bound, said in the notes.
``cached_in``: of a server's prompt tokens, the share an unbounded prefix cache would serve within
the job (``llm.prefix_dispatch.shared_fraction``) over the played prompts: a native agent's
history re-sent every turn, the entries an in-context agent shows until it writes another.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mnemoflow.agents.interactive import ACT_TASK
from mnemoflow.agents.self_evolution import EVOLVE_TASK
from mnemoflow.data import amemgym_procedural
from mnemoflow.data.amemgym import AmemUser, read_environment
from mnemoflow.eval.imported import IMPORTED
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import stage_roles, without_labels
from mnemoflow.planning.conversation import Reader
from mnemoflow.planning.environment import played
from mnemoflow.planning.plan import Line
from mnemoflow.planning.static_qa import Context
from mnemoflow.planning.tokens import cached_tokens, filler, sent_tokens
from mnemoflow.planning.writes import fact_tokens, pattern_of, planned_writes, write_lines
from mnemoflow.protocols import interactive as proto
from mnemoflow.protocols.static_qa import shard_episodes
from mnemoflow.simulators.state_user import TASK as USER_TASK
from mnemoflow.simulators.state_user import StateRevealingUser

PLAYED = (
    "tokens in: the memory and dialogue played with stand-in replies of the expected length "
    "(mnemoflow.planning.conversation)"
)


def environment(ctx: Context, benchmark: str) -> list[AmemUser] | None:
    """The benchmark's users; for one still to be generated with a model, the stand-in users of
    its chain played offline (:mod:`mnemoflow.planning.environment`; ``None`` if none came out).
    """
    if benchmark in ctx.users:
        return ctx.users[benchmark]
    spec = ctx.benchmarks[benchmark]
    generated = ctx.workdir / "results" / benchmark / "environment" / "data.json"
    generate = spec.get("generate") or {}
    users = None
    if generated.is_file():
        users = read_environment(generated)
    elif generate and generate.get("method") != "llm":
        keys = ("users", "periods", "seed")
        data = amemgym_procedural.generate({k: generate[k] for k in keys if k in generate})
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "data.json"
            path.write_text(json.dumps(data), encoding="utf-8")
            users = read_environment(path)
    elif not generate:
        users = read_environment((ctx.workdir / spec["source"]["path"]).resolve())
    else:
        users = played(ctx, benchmark).environment
    ctx.users[benchmark] = users
    return users


def _stand_in_notes(ctx: Context, benchmark: str) -> list[str]:
    """The stand-in's note, for the lines planned over a played environment."""
    return [ctx.played[benchmark].note] if benchmark in ctx.played else []


def _line(benchmark: str, system: str, protocol: str, role: str, task: str, **values: Any) -> Line:
    return Line(benchmark, system, protocol, role, task, **values)


def plan_dialogues(
    ctx: Context, benchmark: str, system: str, protocol: str, period: int, shard: int
) -> list[Line] | None:
    """The lines of one dialogues / replay_dialogues job (``None``: environment unknown): every
    user of the shard played up to the period (:mod:`mnemoflow.planning.conversation`)."""
    users = environment(ctx, benchmark)
    if users is None:
        return None
    if ctx.config["systems"][system].get("type") == IMPORTED:
        return []  # its replies are read from its eval-output: no call
    spec = ctx.benchmarks[benchmark]
    schedule = proto.Schedule(**proto.schedule_of(spec))
    mine = set(shard_episodes([u.id for u in users], shard, int(spec.get("shards", 1))))
    users = [u for u in users if u.id in mine and period < len(u.periods)]
    specs = ctx.gateway.specs
    system_spec = without_labels(ctx.config["systems"][system])
    reply = filler(ctx.tokens_out("agent", ACT_TASK), specs["agent"].backend)
    follow = filler(ctx.tokens_out("user", USER_TASK), specs["user"].backend)
    fact = fact_tokens(pattern_of(system_spec)[0], ctx.tokens_out)
    live = protocol == proto.PROTOCOL
    user_backend = specs["user"].backend
    # (role, task) -> [calls, prompt tokens, of them prefix-cached]
    counts: dict[tuple[str, str], list[float]] = {}
    queries: list[str] = []
    streams = []
    blocks: set[str] = set()  # the job's prompts so far, for the expected prefix-cache share

    def count(role: str, task: str, tokens: float, messages: list | None = None) -> None:
        entry = counts.setdefault((role, task), [0, 0, 0.0])
        entry[0] += 1
        entry[1] += tokens
        if messages is not None:
            entry[2] += cached_tokens(messages, tokens, specs[role].backend, blocks)

    for user in users:
        reader = Reader(system_spec, specs["agent"].backend, fact)
        simulated = StateRevealingUser(user, str(user.periods[period].period_end or ""), None)
        before = 0
        for k in range(period + 1):
            before = len(reader.messages) if k == period else before
            for n, session in enumerate(user.periods[k].sessions):
                opening = proto.first_message(session.session_time, session.query)
                turns: list[SimpleNamespace] = []
                for r in range(schedule.rounds(k)):
                    message = opening if r == 0 else follow
                    if k == period and live:
                        if r:  # the simulated user reads the opening and the last exchange
                            request = simulated.request(turns)
                            tokens = sent_tokens(request.messages, user_backend)
                            count("user", USER_TASK, tokens, request.messages)
                        if reader.queries_embedded():
                            queries.append(message)
                        prompt = reader.chat(message, 2 * r)
                        count("agent", ACT_TASK, reader.prompt(message, 2 * r), prompt)
                    turns += [
                        SimpleNamespace(role="user", content=message, round=r),
                        SimpleNamespace(role="assistant", content=reply, round=r),
                    ]
                    reader.memorize(proto.session_id(user.id, k, n), message, reply)
        for question in user.questions:
            prompt, _ = proto.checkpoint_prompt(question, schedule.order(user, question))
            recall = proto.recall_prompt(user, question)
            for task, text in ((proto.CHOICE_TASK, prompt), (proto.RECALL_TASK, recall)):
                if reader.queries_embedded():
                    queries.append(text)
                count("agent", task, reader.prompt(text), reader.chat(text))
        if system_spec.get("evolve", "none") != "none":
            count("agent", EVOLVE_TASK, 0)
        streams.append((reader.messages, before))
    out = []
    notes = {
        ACT_TASK: f"{schedule.rounds(period)} round(s) per session: min = expected = max",
        USER_TASK: f"{schedule.rounds(period)} round(s) per session: min = expected = max",
        proto.CHOICE_TASK: "one checkpoint question per question",
        proto.RECALL_TASK: "one recall probe per question",
        EVOLVE_TASK: "one evolution per checkpoint; tokens in not estimated",
    }
    for (role, task), (calls, tokens, cached) in counts.items():
        out.append(
            _line(
                benchmark, system, protocol, role, task,
                calls=calls, tokens_in=tokens, tokens_out=calls * ctx.tokens_out(role, task),
                cached_in=cached,
                notes=[notes[task], PLAYED, *_stand_in_notes(ctx, benchmark)],
            )
        )  # fmt: skip
    roles = set(stage_roles(system_spec, "ingest")) | set(stage_roles(system_spec, "query"))
    backend = specs["memory_writer"].backend
    writes = planned_writes(system_spec, streams, backend, filler(fact or 1, backend))

    def line(role: str, task: str, **values: Any) -> Line:
        values["notes"] = [*values.get("notes", []), *_stand_in_notes(ctx, benchmark)]
        return _line(benchmark, system, protocol, role, task, **values)

    embed = specs["embedder"].backend
    out += write_lines(writes, line, ctx.tokens_out, roles, embed, queries, backend)
    if not live and proto.interactive_options(spec).get("off_policy_source") == system:
        for each in out:  # its own transcripts again: every prompt is one the run asked before
            each.cache_hits, each.tokens_in, each.tokens_out = each.calls, 0.0, 0.0
            each.cached_in = 0.0
            each.notes.append("replays the system's own transcripts: answered by the cache")
    return out


def plan_upper_bound(ctx: Context, benchmark: str) -> list[Line] | None:
    """The upper bound's requests, rendered as the protocol renders them, cache keys looked up."""
    users = environment(ctx, benchmark)
    if users is None:
        return None
    schedule = proto.Schedule(**proto.schedule_of(ctx.benchmarks[benchmark]))
    gateway = ctx.gateway
    spec = gateway.specs["agent"]
    line = _line(
        benchmark, "-", "upper_bound", "agent", proto.CHOICE_TASK,
        notes=_stand_in_notes(ctx, benchmark),
    )  # fmt: skip
    blocks: set[str] = set()  # the job's prompts so far, for the expected prefix-cache share
    for user in users:
        for question in user.questions:
            order = schedule.order(user, question)
            for option in range(len(question.choices)):
                prompt, options, state = proto.upper_bound_prompt(question, option, order)
                request = ChatRequest(
                    role="agent",
                    task=proto.CHOICE_TASK,
                    messages=[{"role": "user", "content": prompt}],
                    fields={"question": question.query, "options": options, "context": [state]},
                    response_format={"type": "json_object"},
                )
                # a stand-in's users repeat: its prompts say nothing of the cache
                key = ctx.key(request) if benchmark not in ctx.played else None
                line.calls += 1
                line.rendered += 1
                if key is not None and (key in ctx.planned or gateway.cache.get(key) is not None):
                    line.cache_hits += 1
                    continue
                if key is not None:
                    ctx.planned.add(key)
                tokens = sent_tokens(request.messages, spec.backend)
                line.tokens_in += tokens
                line.cached_in += cached_tokens(request.messages, tokens, spec.backend, blocks)
                line.tokens_out += ctx.tokens_out("agent", proto.CHOICE_TASK)
    return [line]
