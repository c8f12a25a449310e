"""AMemGym generation's later stages (periods, answers, queries): validators on hand-made replies,
the bounded re-ask and the check-and-refine loops through a real Gateway with scripted replies,
and the offline handlers run end to end on a hand-made four-variable user."""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.environment import answers, periods, queries
from mnemoflow.environment.base import InvalidReply, StageContext, StageFailed, StageLog
from mnemoflow.llm import offline
from mnemoflow.llm.gateway import Gateway
from tests.scripted_backend import scripted_gateway

SCHEMA = {
    "fitness_level": ["beginner", "intermediate", "advanced"],  # has topic templates
    "monthly_budget": ["tight", "moderate", "comfortable"],  # has topic templates
    "commute_mode": ["walking", "cycling", "driving"],  # no templates: generic fragments
    "coffee_habit": ["no coffee", "one cup a day", "several cups a day"],
}
INITIAL = {
    "fitness_level": "intermediate",
    "monthly_budget": "moderate",
    "commute_mode": "cycling",
    "coffee_habit": "one cup a day",
}
QUESTIONS = [
    {"query": "How should I plan my week?", "required_info": ["fitness_level", "commute_mode"]},
    {"query": "What should I spend on?", "required_info": ["monthly_budget", "coffee_habit"]},
]
KNOBS = {
    "start_date": "2020-10-31",
    "num_periods": 3,
    "num_months_per_period": 3,
    "num_changes_per_period": 2,
    "max_changes_per_state": 3,
    "min_state_variants": 4,
    "max_validation_errors": 4,
    "max_refinements": 20,
}
ROLES = ("generator_high", "generator_low")


def inputs() -> dict:
    return {
        "persona": {},
        "profile": {"formatted_str": "name: Ana Lima\nage: 34\noccupation: nurse"},
        "schema": {"state_schema": SCHEMA, "questions": QUESTIONS, "merged": {}},
        "initial_state": dict(INITIAL),
    }


def handler(task: str):
    offline._load_handlers()
    return offline.HANDLERS[task]


def offline_reply(request) -> str:
    return handler(request.task)(request.fields)


def context(stage: str, gateway: Gateway, **knobs) -> StageContext:
    return StageContext(gateway, KNOBS | knobs, "user-1", 7, StageLog(stage))


def run_stage(module, gateway: Gateway, data: dict, **knobs):
    ctx = context(module.STAGE.name, gateway, **knobs)
    return asyncio.run(module.STAGE.run(ctx, data)), ctx.log


def offline_chain() -> dict:
    data = inputs()
    gateway = Gateway.from_config({})
    for module in (periods, answers, queries):
        data[module.STAGE.name], _ = run_stage(module, gateway, data)
    return data


# --- validators on hand-made replies -------------------------------------------------------------


def test_a_valid_update_reply_gives_its_summary_and_changes():
    reply = {"period_summary": "Took up running.", "updated": {"fitness_level": "advanced"}}
    assert periods.check_updates(reply, schema=SCHEMA, state=INITIAL, n=2) == (
        "Took up running.",
        {"fitness_level": "advanced"},
    )


@pytest.mark.parametrize(
    ("updated", "error"),
    [
        (
            {
                "fitness_level": "advanced",
                "monthly_budget": "tight",
                "commute_mode": "walking",
                "coffee_habit": "no coffee",
            },  # fmt: skip
            "Number of changes 4 not in expected range [1, 3]",
        ),
        ({}, "Number of changes 0 not in expected range [1, 3]"),
        ({"shoe_size": "42"}, "Invalid state variable 'shoe_size' in updates"),
        (
            {"commute_mode": "flying"},
            "Invalid value 'flying' for state variable 'commute_mode'. "
            "Valid choices: ['walking', 'cycling', 'driving']",
        ),
        (
            {"coffee_habit": "one cup a day"},
            "State variable 'coffee_habit' is not actually changing from 'one cup a day'",
        ),
    ],
)
def test_an_invalid_update_reply_is_rejected_with_its_error(updated, error):
    reply = {"period_summary": "Things changed.", "updated": updated}
    with pytest.raises(InvalidReply) as caught:
        periods.check_updates(reply, schema=SCHEMA, state=INITIAL, n=2)
    assert str(caught.value) == error


UPDATES = {
    "fitness_level": {"old": "intermediate", "new": "advanced"},
    "commute_mode": {"old": "cycling", "new": "driving"},
}


def test_events_covering_every_change_are_accepted():
    reply = {
        "events": [
            {"states": ["fitness_level"], "event": " Joined a running club. "},
            {"states": ["commute_mode"], "event": "Bought a car."},
        ]
    }
    assert periods.check_events(reply, schema=SCHEMA, updates=UPDATES) == [
        {"states": ["fitness_level"], "event": "Joined a running club."},
        {"states": ["commute_mode"], "event": "Bought a car."},
    ]


@pytest.mark.parametrize(
    ("events", "error"),
    [
        (
            [{"states": ["fitness_level"], "event": "Joined a running club."}],
            "Not all state changes are covered by the events; missing: ['commute_mode']",
        ),
        (
            [{"states": ["fitness_level", "commute_mode", "monthly_budget"], "event": "Promoted."}],
            "event 1 names 'monthly_budget', which did not change in this period",
        ),
        (
            [{"states": ["fitness_level", "commute_mode", "mood"], "event": "A good year."}],
            "event 1 names 'mood', which is not a state variable",
        ),
        (
            [{"states": ["fitness_level", "commute_mode"], "event": "  "}],
            'event 1: "event" must be a non-empty string',
        ),
    ],
)
def test_events_missing_a_change_or_naming_another_variable_are_rejected(events, error):
    with pytest.raises(InvalidReply) as caught:
        periods.check_events({"events": events}, schema=SCHEMA, updates=UPDATES)
    assert str(caught.value) == error


def test_initial_queries_must_expose_the_initial_values_of_every_variable():
    good = [
        {"exposed_states": {"fitness_level": "intermediate", "commute_mode": "cycling"}},
        {"exposed_states": {"monthly_budget": "moderate", "coffee_habit": "one cup a day"}},
    ]
    good = [item | {"query": text} for item, text in zip(good, "ab", strict=True)]
    out = queries.check_init_queries({"queries": good}, schema=SCHEMA, state=INITIAL)
    assert [(s["event"], s["query"]) for s in out] == [(None, "a"), (None, "b")]
    wrong = [good[0], {"exposed_states": {"monthly_budget": "tight"}, "query": "b"}]
    with pytest.raises(InvalidReply, match="exposes monthly_budget = 'tight', but the current"):
        queries.check_init_queries({"queries": wrong}, schema=SCHEMA, state=INITIAL)
    partial = [good[0]]
    with pytest.raises(InvalidReply, match=r"missing: \['monthly_budget', 'coffee_habit'\]"):
        queries.check_init_queries({"queries": partial}, schema=SCHEMA, state=INITIAL)
    four = [{"exposed_states": dict(INITIAL), "query": "all at once"}]
    with pytest.raises(InvalidReply, match="must name 1-3 variables"):
        queries.check_init_queries({"queries": four}, schema=SCHEMA, state=INITIAL)


def test_answer_replies_need_exactly_one_answer_per_variant():
    assert answers.check_answers({"variant_1": " a ", "variant_2": "b"}, count=2) == ["a", "b"]
    with pytest.raises(InvalidReply, match=r"missing \['variant_3'\], unexpected \[\]"):
        answers.check_answers({"variant_1": "a", "variant_2": "b"}, count=3)
    with pytest.raises(InvalidReply, match="variant_2 must be a non-empty answer"):
        answers.check_answers({"variant_1": "a", "variant_2": ""}, count=2)
    assert answers.parse_choice(" 3.\n", count=4) == 3
    with pytest.raises(ValueError):
        answers.parse_choice("5", count=4)
    with pytest.raises(ValueError):
        answers.parse_choice("variant 2", count=4)


# --- the bounded re-ask --------------------------------------------------------------------------

WRONG_COUNT = json.dumps(
    {"period_summary": "A busy quarter.", "updated": dict.fromkeys(["commute_mode"], "driving")
     | {"fitness_level": "advanced", "monthly_budget": "tight", "coffee_habit": "no coffee"}}
)  # fmt: skip


def test_an_invalid_update_is_asked_again_with_the_reply_and_its_error():
    replies = iter([WRONG_COUNT])

    def script(request, n):
        if request.task == "env-state-updates":
            return next(replies, None) or offline_reply(request)
        return offline_reply(request)

    gateway, backend = scripted_gateway(script, ROLES)
    out, log = run_stage(periods, gateway, inputs(), num_periods=1)
    asks = [r for r in backend.requests if r.task == "env-state-updates"]
    assert len(asks) == 2
    error = "Number of changes 4 not in expected range [1, 3]"
    assert asks[1].messages[1] == {"role": "assistant", "content": WRONG_COUNT}
    assert (
        asks[1].messages[2]["content"]
        == f"Please try again to fix the error in your response: {error}"
    )
    assert asks[1].fields["errors"] == [error]
    assert log.validation_failures == [f"env-state-updates: {error}"]
    assert 1 <= len(out[0]["updates"]) <= 3


def test_four_invalid_updates_fail_the_stage():
    gateway, backend = scripted_gateway(lambda request, n: WRONG_COUNT, ROLES)
    with pytest.raises(StageFailed) as caught:
        run_stage(periods, gateway, inputs(), num_periods=1)
    assert caught.value.stage == "periods"
    assert caught.value.reason == (
        "env-state-updates: Number of changes 4 not in expected range [1, 3] (4 invalid replies)"
    )
    assert len(backend.requests) == 4


def test_events_missing_a_changed_variable_are_asked_again():
    updates = json.dumps(
        {"period_summary": "p", "updated": {"fitness_level": "advanced", "commute_mode": "driving"}}
    )
    half = json.dumps({"events": [{"states": ["fitness_level"], "event": "Joined a club."}]})
    calls = {"env-events": 0}

    def script(request, n):
        if request.task == "env-state-updates":
            return updates
        calls["env-events"] += 1
        return half if calls["env-events"] == 1 else offline_reply(request)

    gateway, _ = scripted_gateway(script, ROLES)
    out, log = run_stage(periods, gateway, inputs(), num_periods=1)
    assert calls["env-events"] == 2
    assert sorted(n for e in out[0]["events"] for n in e["states"]) == [
        "commute_mode",
        "fitness_level",
    ]
    assert log.validation_failures == [
        "env-events: Not all state changes are covered by the events; missing: ['commute_mode']"
    ]
    assert out[0]["state"] == INITIAL | {"fitness_level": "advanced", "commute_mode": "driving"}
    assert (out[0]["period_start"], out[0]["period_end"]) == ("2020-10-31", "2021-01-31")


# --- check and refine ----------------------------------------------------------------------------


def test_a_query_saying_the_wrong_value_fails_its_check_and_is_refined():
    bad = {
        "queries": [
            {
                "exposed_states": {"commute_mode": "cycling"},
                "query": "I am driving to work now. Tips?",
            },
            {
                "exposed_states": {k: v for k, v in INITIAL.items() if k != "commute_mode"},
                "query": "I'd honestly call my fitness level intermediate right now. Money-wise, "
                "my monthly budget is moderate at the moment. I have one cup a day. Ideas?",
            },
        ]
    }

    def script(request, n):
        return json.dumps(bad) if request.task == "env-init-queries" else offline_reply(request)

    data = inputs() | {"periods": []}
    gateway, backend = scripted_gateway(script, ROLES)
    out, log = run_stage(queries, gateway, data)
    assert log.refinements == 1
    assert log.validation_failures == [
        "period 0 query 1: commute_mode read as 'driving', not 'cycling'"
    ]
    assert out[0][0]["query"] == (
        "As for my commute mode, it's cycling. What would you suggest given my commute mode?"
    )
    assert out[0][1]["query"] == bad["queries"][1]["query"]  # passed its check unchanged
    refine = [r for r in backend.requests if r.task == "env-query-refine"]
    assert refine[0].fields["query"] == "I am driving to work now. Tips?"


def answer_script(bad_answer: str, refine_with: str | None = None):
    """Offline replies, but variant 2's first answer (and every refinement, if given) is bad."""

    def script(request, n):
        if request.task == "env-answers":
            reply = json.loads(offline_reply(request))
            reply["variant_2"] = bad_answer
            return json.dumps(reply)
        if request.task == "env-answer-refine" and refine_with is not None:
            return json.dumps({"answer": refine_with})
        return offline_reply(request)

    return script


def test_an_answer_not_recognisable_as_its_variant_is_refined_until_it_is():
    data = inputs() | {"periods": []}  # one checkpoint: 1 experienced + 3 random variants each
    gateway, _ = scripted_gateway(answer_script("Just do whatever feels right."), ROLES)
    out, log = run_stage(answers, gateway, data)
    assert log.refinements == 2  # variant 2 of each of the two questions
    first = out[0]["answer_choices"]
    problem = next(m for m in log.validation_failures if m.startswith("question 1"))
    assert problem == (
        "question 1 ('How should I plan my week?') variant 2: read as variant 1 "
        + json.dumps(dict(zip(["fitness_level", "commute_mode"], first[0]["state"], strict=True)))
        + ", not variant 2 "
        + json.dumps(dict(zip(["fitness_level", "commute_mode"], first[1]["state"], strict=True)))
    )
    assert first[1]["answer"] != "Just do whatever feels right."
    picked = offline_reply(
        type("R", (), {"task": "env-answer-check", "fields": {
            "question": out[0]["query"], "required_info": out[0]["required_info"],
            "choices": {k: SCHEMA[k] for k in out[0]["required_info"]},
            "variants": [c["state"] for c in first], "answer": first[1]["answer"]}})()
    )  # fmt: skip
    assert picked == "2"


def test_an_answer_still_wrong_after_max_refinements_fails_the_stage_naming_the_question():
    data = inputs() | {"periods": []}
    data["schema"] = data["schema"] | {"questions": QUESTIONS[:1]}
    script = answer_script("Just do whatever feels right.", refine_with="Still vague advice.")
    gateway, backend = scripted_gateway(script, ROLES)
    with pytest.raises(StageFailed) as caught:
        run_stage(answers, gateway, data, max_refinements=2)
    assert caught.value.stage == "answers"
    assert caught.value.reason.startswith(
        "question 1 ('How should I plan my week?') variant 2: read as variant 1 {"
    )
    assert caught.value.reason.endswith("after 2 refinements")
    assert len([r for r in backend.requests if r.task == "env-answer-refine"]) == 2


def test_a_checker_reply_that_is_no_variant_number_fails_the_check_never_guesses():
    data = inputs() | {"periods": []}
    data["schema"] = data["schema"] | {"questions": QUESTIONS[:1]}

    def script(request, n):
        return "The second one." if request.task == "env-answer-check" else offline_reply(request)

    gateway, backend = scripted_gateway(script, ROLES)
    with pytest.raises(StageFailed) as caught:
        run_stage(answers, gateway, data, max_refinements=1)
    assert caught.value.reason.endswith(
        "the checker's reply was not a variant number after 1 refinements"
    )
    assert gateway.ledger.totals().parse_failures >= 2  # each check: asked again, then counted


# --- the offline handlers, end to end ------------------------------------------------------------


def test_offline_updates_prefer_less_changed_variables_and_vary_their_count():
    counts, sizes = (
        {"fitness_level": 3, "monthly_budget": 3, "commute_mode": 0, "coffee_habit": 1},
        set(),
    )
    for seed in range(30):
        fields = {
            "schema": SCHEMA, "state": INITIAL, "update_cnts": counts, "num_changes_per_period": 2,
            "max_changes_per_state": 3, "period_start": "a", "period_end": "b", "seed": seed,
            "errors": [],
        }  # fmt: skip
        reply = json.loads(handler("env-state-updates")(fields))
        summary, updated = periods.check_updates(reply, schema=SCHEMA, state=INITIAL, n=2)
        sizes.add(len(updated))
        if len(updated) <= 2:  # the two variables under the cap come first
            assert set(updated) <= {"commute_mode", "coffee_habit"}
    assert sizes == {1, 2, 3}


def test_offline_chain_satisfies_every_rule_of_the_reference():
    data = offline_chain()
    states = [INITIAL] + [p["state"] for p in data["periods"]]
    assert [(p["period_start"], p["period_end"]) for p in data["periods"]] == [
        ("2020-10-31", "2021-01-31"),
        ("2021-01-31", "2021-04-30"),  # plus_months clamps the 31st to April's end
        ("2021-04-30", "2021-07-31"),
    ]
    for before, period in zip(states, data["periods"], strict=False):
        assert 1 <= len(period["updates"]) <= 3
        assert period["state"] == before | {n: t["new"] for n, t in period["updates"].items()}
        assert all(t["old"] == before[n] != t["new"] for n, t in period["updates"].items())
    for qa in data["answers"]:
        options = [tuple(c["state"]) for c in qa["answer_choices"]]
        truths = {tuple(s[n] for n in qa["required_info"]) for s in states}
        assert len(options) == len(set(options)) >= max(4, len(truths))
        assert all(options.count(t) == 1 for t in truths)
        assert {c["type"] for c in qa["answer_choices"] if tuple(c["state"]) in truths} == {
            "experience"
        }
        assert [c["type"] for c in qa["answer_choices"]].count("random") == len(options) - len(
            truths
        )
        assert len({c["answer"] for c in qa["answer_choices"]}) == len(options)
    sessions = data["queries"]
    assert len(sessions) == 4
    assert {n for s in sessions[0] for n in s["exposed_states"]} == set(SCHEMA)
    assert all(
        s["exposed_states"][n] == INITIAL[n] for s in sessions[0] for n in s["exposed_states"]
    )
    for period, period_sessions in zip(data["periods"], sessions[1:], strict=True):
        assert [s["event"] for s in period_sessions] == [e["event"] for e in period["events"]]
        for session in period_sessions:
            assert all(period["state"][n] == v for n, v in session["exposed_states"].items())
            assert all(v in session["query"] for v in session["exposed_states"].values())


def test_offline_answer_checker_recovers_the_variant_from_the_fragments():
    fields = {
        "question": "q",
        "required_info": ["fitness_level", "commute_mode"],
        "choices": {k: SCHEMA[k] for k in ("fitness_level", "commute_mode")},
        "variants": [["beginner", "walking"], ["beginner", "driving"], ["advanced", "driving"]],
    }
    written = json.loads(handler("env-answers")(fields))
    for number in (1, 2, 3):
        answer = written[f"variant_{number}"]
        assert "beginner" not in answer and "driving" not in answer  # no value named
        assert handler("env-answer-check")(fields | {"answer": answer}) == str(number)
    # only the fitness fragment, which variants 1 and 2 share: a tie, read as the first
    half = "Start with simple movements and build the habit before anything else."
    assert handler("env-answer-check")(fields | {"answer": half}) == "1"


def test_offline_query_checker_reads_the_values_the_query_says():
    choices = {"commute_mode": SCHEMA["commute_mode"], "coffee_habit": SCHEMA["coffee_habit"]}
    check = handler("env-query-check")
    said = "As for my commute mode, it's driving. As for my coffee habit, it's no coffee. Tips?"
    assert json.loads(check({"query": said, "choices": choices})) == {
        "commute_mode": "driving",
        "coffee_habit": "no coffee",
    }
    silent = "What should I cook tonight?"  # says nothing: the first choice as a default
    assert json.loads(check({"query": silent, "choices": choices})) == {
        "commute_mode": "walking",
        "coffee_habit": "no coffee",
    }


def test_answer_options_are_the_checkpoint_tuples_padded_to_the_minimum():
    """Worked example: question 1 needs (fitness_level, commute_mode). Checkpoints 0..2 hold
    (intermediate, cycling), (advanced, cycling), (intermediate, cycling): two distinct tuples,
    padded with two unseen ones to 4. With five checkpoints of five distinct tuples: 5 options,
    none random."""

    def period(**changes):
        return {"state": INITIAL | changes, "updates": {}, "events": []}

    gateway = Gateway.from_config({})
    data = inputs() | {"periods": [period(fitness_level="advanced"), period()]}
    data["schema"] = data["schema"] | {"questions": QUESTIONS[:1]}
    (qa,), _ = run_stage(answers, gateway, data)
    kinds = {tuple(c["state"]): c["type"] for c in qa["answer_choices"]}
    assert len(qa["answer_choices"]) == 4
    assert [kinds.get(("intermediate", "cycling")), kinds.get(("advanced", "cycling"))] == [
        "experience",
        "experience",
    ]
    assert sorted(kinds.values()) == ["experience", "experience", "random", "random"]

    data["periods"] = [
        period(fitness_level="advanced"),
        period(fitness_level="advanced", commute_mode="driving"),
        period(fitness_level="beginner", commute_mode="driving"),
        period(fitness_level="beginner", commute_mode="walking"),
    ]
    (qa,), _ = run_stage(answers, gateway, data)
    assert sorted(tuple(c["state"]) for c in qa["answer_choices"]) == [
        ("advanced", "cycling"),
        ("advanced", "driving"),
        ("beginner", "driving"),
        ("beginner", "walking"),
        ("intermediate", "cycling"),
    ]
    assert {c["type"] for c in qa["answer_choices"]} == {"experience"}
