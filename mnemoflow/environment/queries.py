"""Stage ``queries``: the first user message of every session, each exposing known state values.

The reference's step 7: period 0's queries reveal the initial state, 1-3 variables each, every
variable at least once; an update period has one query per event, revealing that event's new
values. Each query is checked by the model predicting, from the query alone and the exposed
variables' choices, exactly the exposed values, and refined until it does (at most
``max_refinements`` times).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    gather_all,
    numbered_objects,
    parse_json_reply,
    prompt_json,
    refine_until_checked,
    refined_text,
)

INIT_PROMPT = """\
Write the questions a user would naturally put to an AI assistant in daily life, which together \
reveal the user's current personal state.

User profile (on {start}):
{profile}

Current state (every variable must be revealed by some query):
{state}

State schema (variable: its possible values):
{schema}

Rules:
1. Each query fits the user's persona and background and asks for something real.
2. Each query reveals 1-3 state variables, and is consistent with the other values.
3. A revealed value must be distinguishable from the variable's other possible values.
4. Prefer revealing indirectly, but distinguishability comes first.
5. Every variable of the current state is revealed by at least one query.

Reply with JSON: {{"queries": [{{"exposed_states": {{"variable": "current value"}}, \
"query": "the user's message"}}]}}
"""
INIT_QUERIES = Call("generator_low", "env-init-queries", INIT_PROMPT)

UPDATE_PROMPT = """\
Write the questions a user would naturally put to an AI assistant, one per life event below, \
each revealing the state changes of its event.

User profile (on {start}):
{profile}

Events of {begin} to {end}, with the state transitions each one brings:
{events}

State schema (variable: its possible values):
{schema}

Rules:
1. Each query fits the user's persona and long-term traits and asks for something real (not a
   request to confirm the state).
2. Each query uses its event as context, so that every new value of its transitions can be
   inferred clearly.
3. Leave out event details that would suggest values of variables not in its transitions.
4. Sound natural.

Reply with JSON: {{"queries": ["query for event 1", ...]}} with exactly {count} queries, in the \
events' order.
"""
UPDATE_QUERIES = Call("generator_low", "env-update-queries", UPDATE_PROMPT)

CHECK_PROMPT = """\
From this user message alone, predict the most likely value of each state variable below.

User message: "{query}"

Variables and their possible values:
{choices}

Pick one of the listed values for every variable (the most reasonable one if the message does
not say).

Reply with JSON: {{"variable": "predicted value", ...}}
"""
CHECK = Call("generator_low", "env-query-check", CHECK_PROMPT)

REFINE_PROMPT = """\
Rewrite a user's message so that the intended state values can be clearly inferred from it.

Message: "{query}"

Values it must reveal:
{exposed}

Possible values of those variables:
{choices}

What went wrong: {problem}

Keep the user's natural tone and the request itself; add the context that sets each intended
value apart from the other possible values.

Reply with JSON: {{"query": "the rewritten message"}}
"""
REFINE = Call("generator_low", "env-query-refine", REFINE_PROMPT)


def check_init_queries(
    reply: Any, *, schema: dict[str, list[str]], state: dict[str, str]
) -> list[dict[str, Any]]:
    """Period 0's queries: 1-3 variables each, values = the initial state, all variables."""
    covered: set[str] = set()
    out = []
    for number, item in numbered_objects(reply, "queries", "query"):
        exposed, text = item.get("exposed_states"), item.get("query")
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f'query {number}: "query" must be a non-empty string')
        if not isinstance(exposed, dict) or not 1 <= len(exposed) <= 3:
            raise InvalidReply(f'query {number}: "exposed_states" must name 1-3 variables')
        for name, value in exposed.items():
            if name not in schema:
                raise InvalidReply(f"query {number} exposes '{name}', which is not a variable")
            if value != state[name]:
                raise InvalidReply(
                    f"query {number} exposes {name} = '{value}', but the current value is "
                    f"'{state[name]}'"
                )
        covered.update(exposed)
        out.append({"event": None, "exposed_states": dict(exposed), "query": text.strip()})
    missing = [name for name in schema if name not in covered]
    if missing:
        raise InvalidReply(
            f"Not all state variables are exposed by the queries; missing: {missing}"
        )
    return out


def check_update_queries(reply: Any, *, count: int) -> list[str]:
    queries = reply.get("queries") if isinstance(reply, dict) else None
    if not isinstance(queries, list):
        raise InvalidReply('the reply must be an object with a "queries" list')
    if len(queries) != count:
        raise InvalidReply(
            f"Number of queries {len(queries)} does not match number of events {count}"
        )
    for number, text in enumerate(queries, start=1):
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f"query {number} must be a non-empty string")
    return [text.strip() for text in queries]


def parse_prediction(text: str, *, names: list[str]) -> dict[str, Any]:
    """A checker's reply: an object with a prediction for every variable."""
    predicted = parse_json_reply(text)
    if not isinstance(predicted, dict):
        raise ValueError("expected a JSON object of predictions")
    missing = [name for name in names if name not in predicted]
    if missing:
        raise ValueError(f"no prediction for {missing}")
    return predicted


async def _settle(
    ctx: StageContext, what: str, session: dict[str, Any], schema: dict[str, list[str]]
) -> dict[str, Any]:
    """``session`` with its query checked, and refined until the check passes."""
    exposed: dict[str, str] = session["exposed_states"]
    names = list(exposed)
    choices = {name: schema[name] for name in names}

    async def check(query: str) -> str | None:
        predicted = await CHECK.ask(
            ctx,
            fields={"query": query, "choices": choices},
            parse=partial(parse_prediction, names=names),
            query=query,
            choices=prompt_json(choices),
        )
        if predicted is None:
            return "the checker's reply was not a prediction of every variable"
        wrong = [
            f"{name} read as '{predicted[name]}', not '{value}'"
            for name, value in exposed.items()
            if predicted[name] != value
        ]
        return "; ".join(wrong) or None

    async def refine(query: str, problem: str) -> str:
        return await REFINE.ask(
            ctx,
            fields={"query": query, "exposed_states": exposed, "choices": choices},
            validate=refined_text("query"),
            query=query,
            exposed=prompt_json(exposed),
            choices=prompt_json(choices),
            problem=problem,
        )

    query = await refine_until_checked(
        ctx, what=what, draft=session["query"], check=check, refine=refine
    )
    return session | {"query": query}


async def run(ctx: StageContext, inputs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    profile = inputs["profile"]["formatted_str"]
    schema: dict[str, list[str]] = inputs["schema"]["state_schema"]
    initial: dict[str, str] = inputs["initial_state"]
    start = str(ctx.knobs["start_date"])
    seed = f"{ctx.seed}:{ctx.user}"
    drafts: list[list[dict[str, Any]]] = [
        await INIT_QUERIES.ask(
            ctx,
            fields={"state": initial, "schema": schema, "seed": f"{seed}:0"},
            validate=partial(check_init_queries, schema=schema, state=initial),
            start=start,
            profile=profile,
            state=prompt_json(initial),
            schema=prompt_json(schema),
        )
    ]
    for step, period in enumerate(inputs["periods"], start=1):
        updates = period["updates"]
        context = [
            {
                "background": event["event"],
                "state_transition": {name: updates[name] for name in event["states"]},
            }
            for event in period["events"]
        ]
        queries = await UPDATE_QUERIES.ask(
            ctx,
            fields={"events": context, "seed": f"{seed}:{step}"},
            validate=partial(check_update_queries, count=len(context)),
            start=start,
            profile=profile,
            begin=period["period_start"],
            end=period["period_end"],
            events=prompt_json(context),
            schema=prompt_json(schema),
            count=len(context),
        )
        drafts.append(
            [
                {
                    "event": event["event"],
                    "exposed_states": {name: updates[name]["new"] for name in event["states"]},
                    "query": query,
                }
                for event, query in zip(period["events"], queries, strict=True)
            ]
        )
    jobs = [
        _settle(ctx, f"period {p} query {q}", session, schema)
        for p, sessions in enumerate(drafts)
        for q, session in enumerate(sessions, start=1)
    ]
    settled = iter(await gather_all(jobs))
    return [[next(settled) for _ in sessions] for sessions in drafts]


STAGE = Stage(
    name="queries",
    needs=("profile", "schema", "initial_state", "periods"),
    knobs=("start_date", "max_validation_errors", "max_refinements"),
    roles=("generator_low",),
    run=run,
)
