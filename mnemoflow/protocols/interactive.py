"""Interactive on-policy memory (AMemGym): one step of the step chain is one period of every user.

Per user (an episode; users run concurrently, bounded, each one sequential) and per session of
period k: the first user message is ``[Current Time: {session_time}]\\n`` + the session's query;
the assistant acts with its memory (loaded from step k-1's snapshot) and the state-revealing user
continues for the period's number of rounds (``num_rounds_init`` in period 0, ``num_rounds_update``
after), through the one live loop of :mod:`mnemoflow.protocols.conversation`. The assistant
writes memory as it talks (:mod:`mnemoflow.agents.interactive`); the memory after the period is
step k's snapshot. Then, from that snapshot, every checkpoint question is asked with the
reference's prompt (options in the seeded order of :func:`option_order`) and every question's
required info types are probed with the reference's recall prompt. Neither changes memory.
A system configured with ``evolve`` (self-evolving AWI, :mod:`mnemoflow.agents.self_evolution`)
then rewrites its memory-update instructions from the checkpoint's feedback, and the snapshot is
written again with them, so step k+1 updates memory with what step k evolved.

Off-policy replay feeds another run's transcripts through the same write path
(:meth:`InteractiveAgent.memorize`) without acting; questions and probes are the same.

Replies are stored raw with their parse status (the gateway re-asks an unparseable reply; one
that still fails is a parse failure the scorer counts wrong, never a random option). Scoring is
``mnemoflow.eval.amemgym.amemgym_score.score_replies``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from mnemoflow.agents import self_evolution
from mnemoflow.agents.interactive import InteractiveAgent
from mnemoflow.data.amemgym import AmemQuestion, AmemUser, option_order
from mnemoflow.data.registry import n_steps
from mnemoflow.data.tables import DIALOGUES
from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError, reject_unknown
from mnemoflow.eval import imported_amemgym
from mnemoflow.eval.amemgym.amemgym_replies import parse_answer, parse_recall
from mnemoflow.eval.imported import IMPORTED
from mnemoflow.llm.context import scoped
from mnemoflow.llm.types import ChatRequest
from mnemoflow.protocols.conversation import Turn, converse, dialogue_rows, turns_of
from mnemoflow.protocols.registry import register_protocol
from mnemoflow.protocols.snapshot import publishing, save_episode, write_manifest
from mnemoflow.protocols.static_qa import (
    EPISODE_CONCURRENCY,
    bounded,
    episode_dirname,
    episodes_in_flight,
)
from mnemoflow.protocols.step import StepContext
from mnemoflow.simulators.state_user import StateRevealingUser

PROTOCOL = "interactive"  # on-policy: the assistant's own sessions
REPLAY = "interactive_replay"  # off-policy: another run's sessions, memorized without acting
PROTOCOLS = (PROTOCOL, REPLAY)


def interactive_steps(spec: dict[str, Any]) -> int:
    """Periods of the environment (steps): ``generate.periods`` (procedural) or ``num_periods``
    (llm) update periods after the initial one (the reference's convention), else counted in
    ``source.path``."""
    generate = spec.get("generate")
    if generate and generate.get("method") == "llm":
        # the workflow resolved the preset into the spec (environment.knobs.resolved_benchmarks)
        if "num_periods" not in generate:
            raise ConfigError("config benchmarks.*.generate: knobs not resolved (num_periods)")
        return int(generate["num_periods"]) + 1
    if generate:
        return int(generate["periods"]) + 1
    return n_steps(spec)


for _name in PROTOCOLS:
    register_protocol(_name, interactive_steps)

CHOICE_TASK = "amemgym_choice"
RECALL_TASK = "amemgym_recall"

#: How both choice prompts of the reference ask for the answer.
_ANSWER_FORMAT = """\
Express your choice with a number and output in the following JSON format:
```json
{{
    "answer": int
}}
```
Only keep the JSON format output, do not include any other content.
"""

#: AMemGym's checkpoint prompt (eval/overall.py OVERALL_PROMPT).
CHECKPOINT_PROMPT = (
    """\
{query}

Please select the most suitable answer for my current situation from the following options:
(considering my current relevant preferences and state information)

{choices}

"""
    + _ANSWER_FORMAT
)

#: AMemGym's recall probe (eval/diagnosis.py DIAG_PROMPT).
RECALL_PROMPT = """\
{state_schema}

Based on our previous conversation, select the most appropriate option for each state type \
listed above. The selected option should be as close as possible to my current situation.
Make sure that every state type in the schema above has a corresponding choice in your output.

Please respond strictly in the following JSON format:
```json
{{
    "info_type1": "choice",
    "info_type2": "choice",
    ...
}}
```
Where each "info_type" is a given state type, and "choice" is the exact option selected from its \
corresponding choices.

Only keep the JSON format output, do not include any other content.
"""

#: AMemGym's upper-bound prompt (eval/upperbound.py UTILIZATION_PROMPT): the state is given.
UPPER_BOUND_PROMPT = (
    """\
{query}

Given that my current relevant preferences and state information are as follows:
{state}

Please select the most suitable answer for my current situation from the following options:

{choices}

"""
    + _ANSWER_FORMAT
)

_REPLY_COLUMNS = [
    ("reply", pa.string()),  # the last raw reply (the scorer parses it again)
    ("parse_ok", pa.bool_()),
    ("attempts", pa.int64()),
    ("raw_replies", pa.list_(pa.string())),
    ("model", pa.string()),
    ("cache_hit", pa.bool_()),
    ("tokens_in", pa.int64()),
    ("tokens_out", pa.int64()),
]
#: A question asked of a user at the end of a period (checkpoint and recall replies).
_ASKED_COLUMNS = [
    ("user_id", pa.string()),
    ("period", pa.int64()),
    ("question_index", pa.int64()),
]
#: Checkpoint replies: ``option_order`` lists data.json choice indices in the order shown.
CHECKPOINT_REPLIES = pa.schema(
    [*_ASKED_COLUMNS, ("option_order", pa.list_(pa.int64())), *_REPLY_COLUMNS]
)
RECALL_REPLIES = pa.schema([*_ASKED_COLUMNS, *_REPLY_COLUMNS])
#: One row per (user, question, option): the option's state given, no memory.
UPPER_BOUND_REPLIES = pa.schema(
    [
        ("user_id", pa.string()),
        ("question_index", pa.int64()),
        ("option_index", pa.int64()),
        ("option_order", pa.list_(pa.int64())),
        *_REPLY_COLUMNS,
    ]
)
#: The columns ``score_replies`` reads from each table.
SCORER_COLUMNS = {
    "replies": ["user_id", "period", "question_index", "reply", "option_order", "parse_ok"],
    "upper": ["user_id", "question_index", "option_index", "reply", "option_order"],
    "recall": ["user_id", "period", "question_index", "reply"],
}


@dataclass(frozen=True)
class Schedule:
    """Rounds per session (AMemGym v1.base: 1 in period 0, 2 after) and the option shuffle."""

    num_rounds_init: int = 1
    num_rounds_update: int = 2
    option_seed: Any = 0
    shuffle_options: bool = True

    def rounds(self, period: int) -> int:
        return self.num_rounds_init if period == 0 else self.num_rounds_update

    def order(self, user: AmemUser, question: AmemQuestion) -> list[int]:
        n = len(question.choices)
        return option_order(self.option_seed, user.id, question.index, n, self.shuffle_options)


def session_id(user_id: str, period: int, index: int) -> str:
    """The loader's session id, so dialogues and prepared sessions name sessions alike."""
    return f"{user_id}_p{period}_s{index}"


def first_message(session_time: str, query: str) -> str:
    return f"[Current Time: {session_time}]\n{query}"


def numbered(options: list[str]) -> str:
    return "\n".join(f"{n}: {text}" for n, text in enumerate(options, start=1))


def checkpoint_prompt(question: AmemQuestion, order: list[int]) -> tuple[str, list[str]]:
    """The reference's checkpoint prompt with the options in ``order``; (prompt, shown options)."""
    options = [question.choices[i].answer for i in order]
    return CHECKPOINT_PROMPT.format(query=question.query, choices=numbered(options)), options


def recall_schema(user: AmemUser, question: AmemQuestion) -> dict[str, list[str]]:
    """{info type: choices} of a question's required info (each type once, in order)."""
    return {t: user.schema.get(t, []) for t in dict.fromkeys(question.required_info)}


def recall_prompt(user: AmemUser, question: AmemQuestion) -> str:
    schema = json.dumps(recall_schema(user, question), indent=2, ensure_ascii=False)
    return RECALL_PROMPT.format(state_schema=schema)


def upper_bound_prompt(
    question: AmemQuestion, option_index: int, order: list[int]
) -> tuple[str, list[str], str]:
    """(prompt, shown options, state JSON) for the option whose state is given."""
    state = dict(zip(question.required_info, question.choices[option_index].state, strict=True))
    state_text = json.dumps(state, indent=2, ensure_ascii=False)
    options = [question.choices[i].answer for i in order]
    prompt = UPPER_BOUND_PROMPT.format(
        query=question.query, state=state_text, choices=numbered(options)
    )
    return prompt, options, state_text


def _reply_fields(reply) -> dict[str, Any]:
    return {
        "reply": reply.text,
        "parse_ok": bool(reply.parse_ok),
        "attempts": int(reply.attempts),
        "raw_replies": list(reply.raw_replies or [reply.text]),
        "model": reply.model,
        "cache_hit": bool(reply.cache_hit),
        "tokens_in": int(reply.tokens_in),
        "tokens_out": int(reply.tokens_out),
    }


class _SimulatedUser:
    """The state-revealing user as a :class:`~mnemoflow.protocols.conversation.Simulator`."""

    def __init__(self, user: StateRevealingUser):
        self.user = user

    async def reply(self, history: list[Turn]) -> Turn:
        return Turn("user", await self.user.next_message(history))


async def converse_period(
    user: AmemUser, period: int, agent: InteractiveAgent, gateway: Any, schedule: Schedule
) -> list[tuple[str, list[Turn]]]:
    """Every session of the user's period, conversed live; (session id, turns) in order."""
    this = user.periods[period]
    simulator = _SimulatedUser(StateRevealingUser(user, str(this.period_end or ""), gateway))
    out = []
    for index, session in enumerate(this.sessions):
        sid = session_id(user.id, period, index)
        agent.begin_session(sid, session.session_time)
        message = first_message(session.session_time, session.query)
        turns = await converse(agent, simulator, message, schedule.rounds(period))
        out.append((sid, turns))
    return out


async def replay_period(
    user: AmemUser,
    period: int,
    agent: InteractiveAgent,
    rows: pd.DataFrame,
    where: str,
    schedule: Schedule,
) -> list[tuple[str, list[Turn]]]:
    """Memorize another run's sessions of this period without acting (same write path). Each
    session must start with its time-prefixed query and hold the schedule's rounds (the
    reference asserts both)."""
    this = user.periods[period]
    rounds = schedule.rounds(period)
    out = []
    for index, session in enumerate(this.sessions):
        sid = session_id(user.id, period, index)
        mine = rows[rows.dialogue_id == sid].sort_values("_order", kind="stable")
        turns = turns_of(mine.to_dict("records"))
        expected = first_message(session.session_time, session.query)
        at = f"{where}: user {user.id} period {period} session {index}"
        if not turns or turns[0].content != expected:
            raise DataError(
                f"{at}: the replayed dialogue does not start with this session's time-prefixed "
                "query"
            )
        if len(turns) != 2 * rounds:
            raise DataError(
                f"{at}: the replayed dialogue has {len(turns)} turns, the schedule's {rounds} "
                f"rounds make {2 * rounds}"
            )
        agent.begin_session(sid, session.session_time)
        for user_turn, answer in zip(turns[0::2], turns[1::2], strict=True):
            if user_turn.role != "user" or answer.role != "assistant":
                raise DataError(
                    f"{at} round {user_turn.round}: expected a user turn then an assistant turn"
                )
            await agent.memorize(user_turn.content, answer.content)
        out.append((sid, turns))
    return out


async def checkpoint(
    user: AmemUser, period: int, agent: InteractiveAgent, schedule: Schedule
) -> list[dict[str, Any]]:
    """Every question of the user at this period's checkpoint. Memory is only read, so the
    questions are asked concurrently (the gateway bounds what reaches the endpoint)."""

    async def one(question: AmemQuestion) -> dict[str, Any]:
        order = schedule.order(user, question)
        prompt, options = checkpoint_prompt(question, order)
        n = len(options)
        reply = await agent.ask(
            prompt,
            CHOICE_TASK,
            {"question": question.query, "options": options},
            lambda text: parse_answer(text, n),
        )
        return {
            "user_id": user.id,
            "period": period,
            "question_index": question.index,
            "option_order": order,
            **_reply_fields(reply),
        }

    return list(await asyncio.gather(*(one(q) for q in user.questions)))


async def recall(user: AmemUser, period: int, agent: InteractiveAgent) -> list[dict[str, Any]]:
    """The recall probe of every question's required info types (the diagnosis' input);
    read-only like the checkpoint, so asked concurrently."""

    async def one(question: AmemQuestion) -> dict[str, Any]:
        reply = await agent.ask(
            recall_prompt(user, question),
            RECALL_TASK,
            {"schema": recall_schema(user, question)},
            parse_recall,
        )
        return {
            "user_id": user.id,
            "period": period,
            "question_index": question.index,
            **_reply_fields(reply),
        }

    return list(await asyncio.gather(*(one(q) for q in user.questions)))


async def checkpoint_feedback(
    user: AmemUser, agent: InteractiveAgent, replies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What self-evolution learns from this period's checkpoint, per question: the options as
    shown, the parsed answer and the memory lines shown (``self_evolution.evolve``'s input)."""
    questions = {q.index: q for q in user.questions}
    items = []
    for row in replies:
        question = questions[row["question_index"]]
        prompt, options = checkpoint_prompt(question, list(row["option_order"]))
        answer = parse_answer(row["reply"], len(options)) if row["parse_ok"] else None
        memories = await agent.memories_shown(prompt)
        items.append(
            {"question": question.query, "options": options, "answer": answer, "memories": memories}
        )
    return items


def evolve_variant(system_spec: dict[str, Any], memory: Any) -> str | None:
    """The system's ``evolve`` variant when it is configured (a system in the self-evolution
    experiment, ``none`` included); None for every other system."""
    if "evolve" not in system_spec or not hasattr(memory, "memory_types"):
        return None
    return str(memory.params["evolve"])


@dataclass
class StepResult:
    dialogues: pd.DataFrame
    replies: pd.DataFrame
    recall: pd.DataFrame
    manifest: dict[str, Any]
    evolution: pd.DataFrame = dataclasses.field(
        default_factory=lambda: self_evolution.EVOLUTION.empty_table().to_pandas()
    )


def users_in_flight(gateway: Any) -> int:
    """Users conversing at once: twice the agent endpoint's concurrency (at least the default).

    A user's turns are sequential, so while one waits for its simulated user or sits between
    periods another must have a request ready; with only as many users as slots the endpoint
    idles at every turn boundary. A test double of the gateway without specs gets the default.
    """
    return episodes_in_flight(gateway, "agent")


async def run_step(
    users: list[AmemUser],
    step: int,
    ctx: StepContext,
    previous: Path | None,
    snapshot: Path,
    schedule: Schedule,
    source: pd.DataFrame | None = None,
    source_name: str = "source dialogues",
) -> StepResult:
    """Period ``step`` of every user: converse (or replay ``source``), snapshot, then ask.

    ``snapshot`` is written atomically (a staging folder renamed at the end). A user without a
    period ``step`` keeps its memory unchanged and is asked nothing.
    """
    dialogue: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []
    recalls: list[dict[str, Any]] = []
    evolutions: list[dict[str, Any]] = []
    stored: dict[str, list[str]] = {}
    stats: dict[str, dict[str, Any]] = {}
    system_spec, keys, gateway = ctx.system_spec, ctx.keys, ctx.gateway
    if source is not None:
        source = source.assign(_order=range(len(source)))
    imported = imported_output(system_spec, users, f"config systems.{keys.get('system')}")

    async def one(user: AmemUser) -> None:
        name = episode_dirname(user.id)
        memory = ctx.build() if previous is None else ctx.load(Path(previous) / name)
        agent = InteractiveAgent(memory, gateway)
        has_period = step < len(user.periods)
        if imported is not None:  # answered outside mnemoflow: no sessions to hold
            sessions, origin = [], "imported"
        elif has_period and source is None:
            sessions = await converse_period(user, step, agent, gateway, schedule)
            origin = "generated"
        elif has_period:
            mine = source[source.episode_id == user.id]
            sessions = await replay_period(user, step, agent, mine, source_name, schedule)
            origin = "replayed"
        else:
            sessions, origin = [], "generated"
        for sid, turns in sessions:
            dialogue.extend(
                dialogue_rows(turns, **keys, episode_id=user.id, dialogue_id=sid, source=origin)
            )
        target = save_episode(staging, name, memory)
        ids = memory.stored_ids()
        if ids is not None:
            stored[user.id] = sorted(ids)
        stats[user.id] = {**memory.stats(), "pairs_written": agent.writes}
        if has_period and imported is not None:
            answers, probes = imported_replies(imported, user, step)
            replies.extend(answers)
            recalls.extend(probes)
        elif has_period:
            answers = await checkpoint(user, step, agent, schedule)
            replies.extend(answers)
            recalls.extend(await recall(user, step, agent))
            variant = evolve_variant(system_spec, memory)
            if variant is not None:  # rewrite the types section from the checkpoint's feedback
                items = await checkpoint_feedback(user, agent, answers)
                evolution = await self_evolution.evolve(
                    agent.memory, gateway, user.id, step, variant, items
                )
                evolutions.append(evolution)
                memory.save(target)  # the snapshot carries the evolved section
                stats[user.id] = {**memory.stats(), "pairs_written": agent.writes}
        ctx.tick(None)

    with publishing(snapshot) as staging:  # the folder ``one`` saves into
        # Users are sequential inside, independent of each other: keep as many in flight as the
        # agent's endpoint takes requests, so a real endpoint's concurrency is used.
        await bounded(users, scoped(one, lambda user: f"user {user.id}"), users_in_flight(gateway))
        manifest = {
            "system": system_spec,
            "step": step,
            "protocol": keys.get("protocol", PROTOCOL),
            "episodes": {u.id: episode_dirname(u.id) for u in users},
            "stats": stats,
        }
        write_manifest(staging, manifest, stored)
    return StepResult(
        _frame(dialogue, DIALOGUES, ["episode_id"]),  # a user's rows: in conversation order
        _frame(replies, CHECKPOINT_REPLIES, ["user_id", "question_index"]),
        _frame(recalls, RECALL_REPLIES, ["user_id", "question_index"]),
        manifest,
        _frame(evolutions, self_evolution.EVOLUTION, ["user_id"]),
    )


def imported_output(
    system_spec: dict[str, Any], users: list[AmemUser], where: str, shard: bool = True
) -> imported_amemgym.EvalOutput | None:
    """The eval-output an ``imported`` system's replies are read from (its file or folder checked
    against its sha256), None for every other system: with ``shard``, the replies of ``users``
    (a shard's), each naming a period and question they have; else every reply, each naming
    one of ``users`` (the whole environment: what a job checks before it takes its shard)."""
    if system_spec.get("type") != IMPORTED:
        return None
    path, sha256 = system_spec.get("path"), system_spec.get("sha256")
    output = imported_amemgym.read_output(imported_amemgym.checked_output(path, sha256, where))
    if shard:
        output = output.of_users({u.id for u in users})
    return imported_amemgym.checked_against(output, users)


def imported_replies(
    output: imported_amemgym.EvalOutput, user: AmemUser, period: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(checkpoint rows, recall rows) of ``user`` at ``period`` read from an imported
    eval-output, in the tables' columns: no model call, the file's reply as the last raw reply
    (a reply without ``option_order`` showed the data.json order)."""
    questions = {q.index: q for q in user.questions}
    model = f"{IMPORTED}:{imported_amemgym.FORMAT}"
    common = {"attempts": 1, "model": model, "cache_hit": False, "tokens_in": 0, "tokens_out": 0}
    answers = []
    for row in imported_amemgym.period_replies(output, user.id, period, len(user.questions)):
        order = row.get("option_order")
        if not isinstance(order, list):
            order = list(range(len(questions[int(row["question_index"])].choices)))
        answers.append(
            {
                "user_id": user.id, "period": period, "question_index": int(row["question_index"]),
                "option_order": order, "reply": row["reply"], "parse_ok": bool(row["parse_ok"]),
                "raw_replies": [row["reply"]], **common,
            }
        )  # fmt: skip
    probes = [
        {
            "user_id": user.id,
            "period": period,
            "question_index": int(row["question_index"]),
            "reply": row["reply"],
            "parse_ok": True,
            "raw_replies": [row["reply"]],
            **common,
        }  # fmt: skip
        for row in imported_amemgym.period_recall(output, user.id, period)
    ]
    return answers, probes


def _frame(rows: list[dict[str, Any]], schema: pa.Schema, order: list[str]) -> pd.DataFrame:
    """Rows in a stable order: users finish in any order, but each user's rows are appended in
    order, so a stable sort on ``order`` keeps that order (sorting by session id text would put
    session 10 before session 2)."""
    frame = pd.DataFrame(rows, columns=schema.names)
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


async def upper_bound(
    users: list[AmemUser],
    gateway: Any,
    schedule: Schedule,
    progress: Callable[[bool | None], None] | None = None,
) -> pd.DataFrame:
    """One reply per (user, question, option) with that option's state given and no memory, asked
    in JSON mode (``response_format`` json_object) as the reference does.

    It depends on the agent's model only, not on the memory system: computed once per benchmark.
    """
    rows: list[dict[str, Any]] = []

    async def one(user: AmemUser) -> None:
        for question in user.questions:
            order = schedule.order(user, question)
            for option_index in range(len(question.choices)):
                prompt, options, state = upper_bound_prompt(question, option_index, order)
                n = len(options)
                request = ChatRequest(
                    role="agent",
                    task=CHOICE_TASK,
                    messages=[{"role": "user", "content": prompt}],
                    fields={"question": question.query, "options": options, "context": [state]},
                    # the reference's call_llm(json=True); the role's structured_output decides
                    response_format={"type": "json_object"},
                )
                reply = await gateway.chat(request, parse=lambda t, n=n: parse_answer(t, n))
                rows.append(
                    {
                        "user_id": user.id,
                        "question_index": question.index,
                        "option_index": option_index,
                        "option_order": order,
                        **_reply_fields(reply),
                    }
                )
                if progress:
                    progress(reply.cache_hit)

    await bounded(users, one, EPISODE_CONCURRENCY)
    return _frame(rows, UPPER_BOUND_REPLIES, ["user_id", "question_index", "option_index"])


# ---- the benchmark's knobs of these protocols (read by the rules for their params) ------------

#: A benchmark's ``interactive:`` entry: the rounds per session (AMemGym v1.base: 1, then 2), the
#: system whose on-policy transcripts ``interactive_replay`` memorizes, and whether the upper
#: bound is scored with the reference's state-tuple lookup (docs/interactive.md).
INTERACTIVE_KEYS = (
    "num_rounds_init",
    "num_rounds_update",
    "off_policy_source",
    "reference_upper_bound",
)


def interactive_options(spec: dict[str, Any]) -> dict[str, Any]:
    options = dict(spec.get("interactive") or {})
    reject_unknown(options, INTERACTIVE_KEYS, "config benchmarks.*.interactive", list_known=True)
    return options


def replay_source(spec: dict[str, Any]) -> str:
    """The system whose ``interactive`` transcripts the ``interactive_replay`` protocol replays."""
    source = interactive_options(spec).get("off_policy_source")
    if not source:
        raise ConfigError(
            "config benchmarks.*.interactive.off_policy_source: required by the "
            "interactive_replay protocol (the system whose transcripts are replayed)"
        )
    return str(source)


def reference_upper_bound(spec: dict[str, Any]) -> bool:
    return bool(interactive_options(spec).get("reference_upper_bound", False))


def schedule_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The loop's knobs (:class:`Schedule`) as a plain dict: a job param, so a change re-runs the
    dialogues. An environment generated with a model (``generate: {method: llm}``, resolved by
    ``environment.knobs.resolved_benchmarks``) gives its preset's rounds unless ``interactive:``
    sets them."""
    options = interactive_options(spec)
    generate = spec.get("generate") or {}
    if generate.get("method") == "llm":
        options = {
            "num_rounds_init": generate.get("num_rounds_init", 1),
            "num_rounds_update": generate.get("num_rounds_update", 2),
            **options,
        }
    return {
        "num_rounds_init": int(options.get("num_rounds_init", 1)),
        "num_rounds_update": int(options.get("num_rounds_update", 2)),
        "option_seed": spec.get("seed", 0),
        "shuffle_options": bool(spec.get("shuffle_options", True)),
    }
