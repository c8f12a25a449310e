"""Stage ``initial_state``: the value of every state variable at the start date.

The model picks one legal choice per variable, consistent with the profile and preferably away
from the ends of a range, so that later periods can move it either way.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    prompt_json,
)
from mnemoflow.environment.questions import total_months

PROMPT = """Choose the starting values of a user's personal state variables. The values should
1. agree with the user's profile as it is today,
2. leave room for natural change over the next {months} months,
3. make it likely that the user passes through different values of every variable.

The user's profile (today, {start_date}):
{profile}

The state variables, each with its possible values:
{schema}

For every variable pick exactly ONE of its listed values. Prefer values that are neither the
first nor the last of a range (so the user can move both ways) and realistic starting points that
could develop over later updates.

Reply with a JSON object mapping every variable name to its chosen value."""
INITIAL_STATE = Call("generator_low", "env-initial-state", PROMPT)


def validate_initial_state(reply: Any, schema: dict[str, list[str]]) -> dict[str, str]:
    """Every variable of ``schema``, no other, each with one of its choices."""
    if not isinstance(reply, dict):
        raise InvalidReply("the reply must be a JSON object mapping variables to values")
    for name, value in reply.items():
        if name not in schema:
            raise InvalidReply(f"{name!r} is not a state variable")
        if value not in schema[name]:
            raise InvalidReply(
                f"{value!r} is not a valid value of {name!r}; valid values: {schema[name]}"
            )
    missing = [name for name in schema if name not in reply]
    if missing:
        raise InvalidReply(f"state variable {missing[0]!r} is missing")
    return {name: reply[name] for name in schema}


async def run(ctx: StageContext, inputs: dict[str, Any]) -> dict[str, str]:
    knobs = ctx.knobs
    schema = inputs["schema"]["state_schema"]
    return await INITIAL_STATE.ask(
        ctx,
        fields={"user": ctx.user, "seed": ctx.seed, "schema": schema},
        validate=lambda reply: validate_initial_state(reply, schema),
        months=total_months(knobs),
        start_date=knobs["start_date"],
        profile=inputs["profile"]["formatted_str"],
        schema=prompt_json(schema),
    )


STAGE = Stage(
    name="initial_state",
    needs=("profile", "schema"),
    knobs=("start_date", "num_periods", "num_months_per_period", "seed", "max_validation_errors"),
    roles=("generator_low",),
    run=run,
)
