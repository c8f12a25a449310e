"""Stage ``periods``: how the user's state evolves, period by period, and the events behind it.

The reference's step 5: for each update period the high-temperature generator proposes about
``num_changes_per_period`` changes (given the profile, the schema, the current state, every prior
update and the per-variable change counts), validated and re-asked with the error; then the
low-temperature generator explains the changes as life events covering every changed variable
and no other.
"""

from __future__ import annotations

from datetime import date
from functools import partial
from typing import Any

from mnemoflow.data.amemgym_procedural import plus_months
from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    numbered_objects,
    prompt_json,
)

UPDATES_PROMPT = """\
Propose how a user's personal state changes over the next {months} months.

Step {step} of {total} ({left} left). Current date {begin}; target date {end}.

User profile (as of the start date {start}):
{profile}

State schema (variable: its possible values):
{schema}

Current state:
{state}

Updates of the earlier periods:
{prior}

How often each variable has changed so far (prefer variables changed fewer than {cap} times):
{counts}

Rules:
1. Change about {n} variables (between {low} and {high}).
2. Prefer variables changed fewer than {cap} times; leave the others alone if you can.
3. Keep the changes realistic and gradual, consistent with the profile, leaving room to evolve.
4. Change dependent variables together when one implies the other.
5. Every new value is one of the variable's possible values and differs from its current value.

Reply with JSON: {{"period_summary": "what happened in this period and why", \
"updated": {{"variable": "new value"}}}}
"""
UPDATES = Call("generator_high", "env-state-updates", UPDATES_PROMPT)

EVENTS_PROMPT = """\
Write the life events that caused (or follow from) a user's state changes in one period.

User profile (as of the start date {start}):
{profile}

Period: {begin} to {end}. Context: {summary}

Changes (variable, old value, new value, possible values):
{changes}

Unchanged variables (no event may suggest they changed):
{unchanged}

Rules:
1. Together the events explain every change; an event may cover several related changes.
2. Make the events concrete and believable for this user at this time.
3. Prefer events that imply a change without stating it; if you must be explicit, do not reuse
   the variable names or values, but keep the new value distinguishable from the other choices.
4. No event may imply a change to an unchanged variable.

Reply with JSON: {{"events": [{{"states": ["changed variable", ...], "event": "what happened"}}]}}
"""
EVENTS = Call("generator_low", "env-events", EVENTS_PROMPT)


def check_updates(
    reply: Any, *, schema: dict[str, list[str]], state: dict[str, str], n: int
) -> tuple[str, dict[str, str]]:
    """(period summary, {variable: new value}) of a valid reply; else :class:`InvalidReply`."""
    if not isinstance(reply, dict) or not isinstance(reply.get("updated"), dict):
        raise InvalidReply('the reply must be an object with an "updated" object')
    updated, summary = reply["updated"], reply.get("period_summary")
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidReply('"period_summary" must be a non-empty string')
    low, high = max(1, n - 1), n + 1
    if not low <= len(updated) <= high:
        raise InvalidReply(
            f"Number of changes {len(updated)} not in expected range [{low}, {high}]"
        )
    for name, value in updated.items():
        if name not in schema:
            raise InvalidReply(f"Invalid state variable '{name}' in updates")
        if value not in schema[name]:
            raise InvalidReply(
                f"Invalid value '{value}' for state variable '{name}'. "
                f"Valid choices: {schema[name]}"
            )
        if value == state[name]:
            raise InvalidReply(f"State variable '{name}' is not actually changing from '{value}'")
    return summary.strip(), dict(updated)


def check_events(
    reply: Any, *, schema: dict[str, list[str]], updates: dict[str, dict[str, str]]
) -> list[dict[str, Any]]:
    """The events of a valid reply: each names only changed variables, all of them together."""
    covered: set[str] = set()
    out = []
    for number, event in numbered_objects(reply, "events", "event"):
        states, text = event.get("states"), event.get("event")
        if not isinstance(states, list) or not states:
            raise InvalidReply(f'event {number}: "states" must be a non-empty list')
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f'event {number}: "event" must be a non-empty string')
        for name in states:
            if name not in schema:
                raise InvalidReply(f"event {number} names '{name}', which is not a state variable")
            if name not in updates:
                raise InvalidReply(
                    f"event {number} names '{name}', which did not change in this period"
                )
        covered.update(states)
        out.append({"states": list(dict.fromkeys(states)), "event": text.strip()})
    missing = [name for name in updates if name not in covered]
    if missing:
        raise InvalidReply(f"Not all state changes are covered by the events; missing: {missing}")
    return out


async def run(ctx: StageContext, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    profile = inputs["profile"]["formatted_str"]
    schema: dict[str, list[str]] = inputs["schema"]["state_schema"]
    state: dict[str, str] = dict(inputs["initial_state"])
    knobs = ctx.knobs
    start_text = str(knobs["start_date"])
    start = date.fromisoformat(start_text)
    total, months = int(knobs["num_periods"]), int(knobs["num_months_per_period"])
    n, cap = int(knobs["num_changes_per_period"]), int(knobs["max_changes_per_state"])
    counts = dict.fromkeys(schema, 0)
    prior: list[dict[str, Any]] = []
    periods: list[dict[str, Any]] = []
    for step in range(1, total + 1):
        begin = plus_months(start, months * (step - 1)).isoformat()
        end = plus_months(start, months * step).isoformat()
        # what both of the period's prompts say about it
        period = dict(start=start_text, profile=profile, begin=begin, end=end)
        summary, updated = await UPDATES.ask(
            ctx,
            fields={
                "schema": schema,
                "state": state,
                "update_cnts": dict(counts),
                "num_changes_per_period": n,
                "max_changes_per_state": cap,
                "period_start": begin,
                "period_end": end,
                "seed": f"{ctx.seed}:{ctx.user}:{step}",
            },
            validate=partial(check_updates, schema=schema, state=state, n=n),
            months=months,
            step=step,
            total=total,
            left=total - step,
            **period,
            schema=prompt_json(schema),
            state=prompt_json(state),
            prior=prompt_json(prior),
            cap=cap,
            counts=prompt_json(counts),
            n=n,
            low=max(1, n - 1),
            high=n + 1,
        )
        updates = {name: {"old": state[name], "new": value} for name, value in updated.items()}
        changes = [
            {"variable": name, "from": t["old"], "to": t["new"], "possible_values": schema[name]}
            for name, t in updates.items()
        ]
        unchanged = {name: value for name, value in state.items() if name not in updates}
        events = await EVENTS.ask(
            ctx,
            fields={"updates": updates, "seed": f"{ctx.seed}:{ctx.user}:{step}"},
            validate=partial(check_events, schema=schema, updates=updates),
            **period,
            summary=summary,
            changes=prompt_json(changes),
            unchanged=prompt_json(unchanged),
        )
        state = state | updated
        for name in updated:
            counts[name] += 1
        prior.append(
            {
                "period_start": begin,
                "period_end": end,
                "period_summary": summary,
                "updated": updated,
            }
        )
        periods.append(
            {
                "period_start": begin,
                "period_end": end,
                "period_summary": summary,
                "updates": updates,
                "state": dict(state),
                "events": events,
            }
        )
    return periods


STAGE = Stage(
    name="periods",
    needs=("profile", "schema", "initial_state"),
    knobs=(
        "start_date",
        "num_periods",
        "num_months_per_period",
        "num_changes_per_period",
        "max_changes_per_state",
        "max_validation_errors",
    ),
    roles=("generator_high", "generator_low"),
    run=run,
)
