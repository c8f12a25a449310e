"""The generation runner on a chain of small fake stages: checkpoints are reused while their key
holds, a changed knob / role binding / code re-runs exactly that stage and the stages after it, a
stage that gives up is a failure record, a transport error fails the job. Then the data.json
assembly on hand-written stage outputs: the reference schema and the evaluation's reader
accept it."""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest

from mnemoflow.data.amemgym import read_environment
from mnemoflow.environment import knobs as knobs_
from mnemoflow.environment.assemble import assemble_user, data_text, validate_data
from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    StageFailed,
    StageLog,
    refined_text,
)
from mnemoflow.environment.runner import Failure, generate_user
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import EndpointError, Reply

PERSONA = {"key": "p0", "name": "Ada Example"}
KNOBS = {"num_questions": 2, "num_periods": 1, "max_refinements": 20}
RUNS: list[str] = []  # stage names, in the order their run functions ran


async def first_run(ctx, inputs):
    RUNS.append("first")
    return {"questions": ctx.knobs["num_questions"], "who": inputs["persona"]["name"]}


async def first_run_changed(ctx, inputs):
    RUNS.append("first")
    return {"questions": ctx.knobs["num_questions"] * 10, "who": inputs["persona"]["name"]}


async def second_run(ctx, inputs):
    RUNS.append("second")
    ctx.log.calls += 3  # as if it had asked the model three times
    return [inputs["first"]["questions"], ctx.knobs["num_periods"]]


async def third_run(ctx, inputs):
    RUNS.append("third")
    return {"refinements": ctx.knobs["max_refinements"], "from": inputs["second"]}


async def failing_run(ctx, inputs):
    RUNS.append("second")
    ctx.log.calls += 4
    ctx.log.validation_failures.append("update: 7 changes, expected 3..5")
    raise StageFailed("second", "update: 7 changes, expected 3..5 (4 invalid replies)")


async def broken_endpoint(ctx, inputs):
    RUNS.append("second")
    raise EndpointError("role generator_low: 503 from http://example/v1 after 6 retries")


FIRST = Stage("first", (), ("num_questions",), ("generator_high",), first_run)
SECOND = Stage("second", ("first",), ("num_periods",), ("generator_low",), second_run)
THIRD = Stage("third", ("second",), ("max_refinements",), ("generator_low",), third_run)
CHAIN = [FIRST, SECOND, THIRD]


def outputs(outputs, knobs, seed):
    return outputs


def run(tmp_path, chain=CHAIN, knobs=KNOBS, models=None, seed=1):
    RUNS.clear()
    gateway = Gateway.from_config(models or {})
    return asyncio.run(
        generate_user(gateway, PERSONA, knobs, seed, tmp_path / "stages", chain, finish=outputs)
    )


def reused(rows):
    return {row["stage"]: row["reused"] for row in rows}


def test_first_run_computes_every_stage_and_a_rerun_reuses_all(tmp_path):
    result, rows = run(tmp_path)
    assert RUNS == ["first", "second", "third"]
    assert result["third"] == {"refinements": 20, "from": [2, 1]}
    assert reused(rows) == {"first": False, "second": False, "third": False}
    assert [row["calls"] for row in rows] == [0, 3, 0]
    stored = json.loads((tmp_path / "stages" / "second.json").read_text())
    assert stored["output"] == [2, 1]
    assert stored["log"]["calls"] == 3

    again, rows = run(tmp_path)
    assert RUNS == []  # nothing ran: every key unchanged
    assert again == result
    assert reused(rows) == {"first": True, "second": True, "third": True}
    assert [row["calls"] for row in rows] == [0, 0, 0]


def test_a_late_knob_reruns_only_its_stage(tmp_path):
    run(tmp_path)
    result, rows = run(tmp_path, knobs={**KNOBS, "max_refinements": 5})
    assert RUNS == ["third"]
    assert reused(rows) == {"first": True, "second": True, "third": False}
    assert result["third"]["refinements"] == 5


def test_an_early_knob_reruns_its_stage_and_everything_downstream(tmp_path):
    run(tmp_path)
    result, _ = run(tmp_path, knobs={**KNOBS, "num_questions": 4})
    assert RUNS == ["first", "second", "third"]
    assert result["third"]["from"] == [4, 1]


def test_a_knob_no_stage_reads_reruns_nothing(tmp_path):
    run(tmp_path)
    _, rows = run(tmp_path, knobs={**KNOBS, "num_rounds_update": 5})
    assert RUNS == []
    assert all(row["reused"] for row in rows)


def test_a_role_binding_change_reruns_the_stages_of_that_role(tmp_path):
    run(tmp_path)
    # generator_low is the role of the second and third stages; the first keeps its checkpoint
    _, rows = run(tmp_path, models={"generator_low": {"temperature": 0.7}})
    assert RUNS == ["second", "third"]
    assert reused(rows) == {"first": True, "second": False, "third": False}
    run(tmp_path, models={"generator_low": {"temperature": 0.7}})
    assert RUNS == []
    run(tmp_path, models={"generator_high": {"temperature": 1.0}})
    assert RUNS == ["first", "second", "third"]  # the first stage's output feeds the others


def test_a_code_change_reruns_that_stage_and_downstream(tmp_path):
    run(tmp_path)
    changed = Stage("first", (), ("num_questions",), ("generator_high",), first_run_changed)
    result, _ = run(tmp_path, chain=[changed, SECOND, THIRD])
    assert RUNS == ["first", "second", "third"]
    assert result["second"] == [20, 1]


def test_another_seed_reruns_everything(tmp_path):
    run(tmp_path)
    run(tmp_path, seed=2)
    assert RUNS == ["first", "second", "third"]


def test_a_stage_that_gives_up_is_a_failure_record_and_later_stages_do_not_run(tmp_path):
    failing = Stage("second", ("first",), ("num_periods",), ("generator_low",), failing_run)
    result, rows = run(tmp_path, chain=[FIRST, failing, THIRD])
    assert result == Failure("second", "update: 7 changes, expected 3..5 (4 invalid replies)")
    assert RUNS == ["first", "second"]
    assert [(r["stage"], r["failed"], r["calls"], r["validation_failures"]) for r in rows] == [
        ("first", False, 0, 0),
        ("second", True, 4, 1),
    ]
    assert rows[1]["reason"] == "update: 7 changes, expected 3..5 (4 invalid replies)"
    assert not (tmp_path / "stages" / "second.json").exists()  # a failure is not a checkpoint


def test_a_transport_error_propagates_and_the_rerun_resumes_from_the_checkpoints(tmp_path):
    broken = Stage("second", ("first",), ("num_periods",), ("generator_low",), broken_endpoint)
    with pytest.raises(EndpointError, match="503"):
        run(tmp_path, chain=[FIRST, broken, THIRD])
    assert RUNS == ["first", "second"]
    _, rows = run(tmp_path)
    assert RUNS == ["second", "third"]
    assert reused(rows) == {"first": True, "second": False, "third": False}


def test_a_stage_needing_a_later_stage_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="stage second needs"):
        run(tmp_path, chain=[SECOND, FIRST])


# --- knobs ------------------------------------------------------------------------------------


def test_presets_are_the_reference_configs_and_overrides_win():
    base = knobs_.resolve({"preset": "v1.base"})
    assert (base["num_periods"], base["num_states_per_question"]) == (10, 2)
    assert (base["num_rounds_init"], base["num_rounds_update"], base["seed"]) == (1, 2, 42)
    assert (base["max_validation_errors"], base["max_refinements"]) == (4, 20)
    extra = knobs_.resolve({"preset": "v1.extra", "num_periods": 3})
    assert (extra["num_periods"], extra["num_states_per_question"]) == (3, 3)
    assert (extra["num_rounds_init"], extra["num_rounds_update"]) == (2, 5)
    assert knobs_.resolve({}) == base  # v1.base is the default preset


@pytest.mark.parametrize(
    ("generate", "message"),
    [
        ({"num_period": 3}, "config benchmarks.gen.generate.num_period: unknown knob"),
        ({"num_periods": "3"}, "config benchmarks.gen.generate.num_periods: an integer"),
        ({"num_periods": 0}, "config benchmarks.gen.generate.num_periods: at least 1"),
        ({"start_date": "1/10/2020"}, "config benchmarks.gen.generate.start_date: a date"),
        ({"exclude_ids": "abc"}, "config benchmarks.gen.generate.exclude_ids: a list"),
        ({"preset": "v2"}, "config benchmarks.gen.generate.preset: one of"),
    ],
)
def test_a_wrong_knob_is_one_line_naming_its_key(generate, message):
    with pytest.raises(ConfigError) as caught:
        knobs_.resolve(generate, "gen")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


# --- assembly ---------------------------------------------------------------------------------

SCHEMA = {"diet": ["vegan", "vegetarian", "omnivore"], "budget": ["low", "medium", "high"]}
STAGE_OUTPUTS = {
    "profile": {
        "uuid": "u-1",
        "name": "Ada Example",
        "age": 34,
        "gender": "female",
        "marital_status": "single",
        "education_level": "master",
        "occupation": "engineer",
        "hobbies_and_interests": "climbing",
        "skills_and_expertise": "python",
        "complementary_info": "lives in Lyon",
        "formatted_str": "name: Ada Example\nage: 34",
    },
    "schema": {
        "state_schema": SCHEMA,
        "questions": [{"query": "What should I cook?", "required_info": ["diet", "budget"]}],
        "merged": {},
    },
    "initial_state": {"diet": "vegetarian", "budget": "medium"},
    "periods": [
        {
            "period_start": "2020-10-01",
            "period_end": "2021-01-01",
            "period_summary": "Ada went vegan.",
            "updates": {"diet": {"old": "vegetarian", "new": "vegan"}},
            "state": {"diet": "vegan", "budget": "medium"},
            "events": [{"states": ["diet"], "event": "Ada watched a documentary."}],
        }
    ],
    "answers": [
        {
            "query": "What should I cook?",
            "required_info": ["diet", "budget"],
            "answer_choices": [
                {"state": ["vegan", "medium"], "answer": "Lentil curry.", "type": "experience"},
                {"state": ["vegetarian", "medium"], "answer": "Paneer.", "type": "experience"},
                {"state": ["omnivore", "low"], "answer": "Chicken rice.", "type": "random"},
                {"state": ["vegan", "high"], "answer": "Tasting menu.", "type": "random"},
            ],
        }
    ],
    "queries": [
        [
            {"event": None, "exposed_states": {"diet": "vegetarian"}, "query": "I eat no meat."},
            {"event": None, "exposed_states": {"budget": "medium"}, "query": "Mid budget."},
        ],
        [
            {
                "event": "Ada watched a documentary.",
                "exposed_states": {"diet": "vegan"},
                "query": "No more dairy for me.",
            }
        ],
    ],
}
START = {"start_date": "2020-10-01"}


def test_assembly_writes_period_zero_sessions_times_and_update_counts():
    user = assemble_user(STAGE_OUTPUTS, START, seed=3)
    assert (user["id"], user["start_time"]) == ("u-1", "2020-10-01")
    zero, one = user["periods"]
    assert (zero["period_start"], zero["period_end"], zero["period_summary"]) == (
        None,
        "2020-10-01",
        None,
    )
    assert zero["updates"] == {
        "diet": {"old": None, "new": "vegetarian"},
        "budget": {"old": None, "new": "medium"},
    }
    # two period-0 sessions on the last two days up to the start date, evenings
    times = [s["session_time"] for s in zero["sessions"]]
    assert [t[:10] for t in times] == ["2020-09-30", "2020-10-01"]
    assert all("19:00:00" <= t[11:] <= "22:00:00" for t in times)
    assert [s["event"] for s in zero["sessions"]] == [None, None]
    assert one["sessions"][0]["session_time"][:10] == "2021-01-01"
    assert one["sessions"][0]["messages"] == []
    # counts up to each period (the procedural generator's convention)
    assert zero["update_cnts"] == {"diet": 0, "budget": 0}
    assert one["update_cnts"] == {"diet": 1, "budget": 0}
    assert "events" not in one  # events live in the sessions, as in the reference's file
    assert assemble_user(STAGE_OUTPUTS, START, seed=3) == user  # seeded times


def test_assembled_user_passes_the_reference_schema_and_the_reader(tmp_path):
    user = assemble_user(STAGE_OUTPUTS, START, seed=3)
    validate_data([user])
    path = tmp_path / "data.json"
    path.write_text(data_text([user]))
    (read,) = read_environment(path)
    assert read.id == "u-1"
    assert len(read.periods) == 2
    broken = json.loads(json.dumps(user))
    del broken["periods"][1]["sessions"][0]["session_time"]
    with pytest.raises(jsonschema.ValidationError):
        validate_data([broken])


def test_assembly_refuses_queries_for_the_wrong_number_of_periods():
    outputs = {**STAGE_OUTPUTS, "queries": STAGE_OUTPUTS["queries"][:1]}
    with pytest.raises(ValueError, match="1 periods of queries for 1 update periods"):
        assemble_user(outputs, START, seed=3)


# --- the report's generation section ----------------------------------------------------------


def test_generation_section_totals_stages_in_chain_order_and_names_failed_users():
    import pandas as pd

    from mnemoflow.report.generation import generation_markdown, generation_tables

    def row(user, stage, calls, failures=0, refinements=0, reused=False, reason=""):
        return {
            "benchmark": "gen",
            "user": user,
            "persona": f"p{user}",
            "stage": stage,
            "calls": calls,
            "asks": calls,
            "validation_failures": failures,
            "refinements": refinements,
            "reused": reused,
            "failed": bool(reason),
            "reason": reason,
        }

    report = pd.DataFrame(
        [
            row(0, "profile", 1),
            row(0, "questions", 3, failures=1),
            row(0, "answers", 9, failures=2, refinements=2),
            row(1, "profile", 0, reused=True),
            row(1, "questions", 0, reused=True),
            row(1, "answers", 4, failures=5, refinements=4, reason="answer 2: read as 3"),
        ]
    )
    stages = generation_tables(report)["stages"]
    assert stages[
        ["stage", "users", "calls", "validation_failures", "refinements"]
    ].values.tolist() == [
        ["profile", 2, 1, 0, 0],
        ["questions", 2, 3, 1, 0],
        ["answers", 2, 13, 7, 6],
    ]
    assert stages[["reused", "failed"]].values.tolist() == [[1, 0], [1, 0], [0, 1]]
    text = "\n".join(generation_markdown(report))
    assert "## gen: environment generation (2 users, 1 failed)" in text
    assert "| 1 | p1 | answers | answer 2: read as 3 |" in text
    assert generation_markdown(None) == []


def test_the_preset_feeds_the_interactive_schedule_and_steps_unless_interactive_sets_them():
    from mnemoflow.environment.knobs import resolved_benchmarks
    from mnemoflow.protocols.interactive import interactive_steps, schedule_of

    config = {
        "benchmarks": {
            "extra": {"generate": {"method": "llm", "preset": "v1.extra"}},
            "mine": {
                "generate": {"method": "llm", "preset": "v1.extra", "num_periods": 3},
                "interactive": {"num_rounds_update": 3},
            },
            "procedural": {"generate": {"users": 2, "periods": 2, "seed": 1}},
        }
    }
    benchmarks = resolved_benchmarks(config["benchmarks"])
    extra, mine, procedural = (benchmarks[n] for n in ("extra", "mine", "procedural"))
    assert extra["generate"]["num_states_per_question"] == 3  # resolved
    assert "num_states_per_question" not in procedural["generate"]
    schedule = schedule_of(extra)
    assert (schedule["num_rounds_init"], schedule["num_rounds_update"]) == (2, 5)
    schedule = schedule_of(mine)
    assert (schedule["num_rounds_init"], schedule["num_rounds_update"]) == (2, 3)
    assert [interactive_steps(s) for s in (extra, mine, procedural)] == [21, 4, 3]


# --- the real chain, offline ------------------------------------------------------------------


def test_the_offline_chain_generates_users_the_reference_reads_and_a_rerun_reuses_them(tmp_path):
    import pandas as pd

    from mnemoflow.environment.personas import PERSONAS
    from mnemoflow.jobs import JobEnv, RunKeys
    from mnemoflow.jobs import environment as jobs_environment

    knobs = knobs_.resolve({"num_user_profiles": 2, "num_periods": 2, "num_questions": 3}, "gen")
    models = {"generator_high": {}, "generator_low": {}}

    def generate():
        for user in (0, 1):
            jobs_environment.generate_user(
                jobs_environment.UserFiles(
                    personas=str(PERSONAS),
                    user=str(tmp_path / f"{user}.json"),
                    ledger=str(tmp_path / f"{user}.ledger.json"),
                ),
                RunKeys(benchmark="gen", user=user),
                JobEnv(models),
                knobs=knobs,
                checkpoints=str(tmp_path / "stages" / str(user)),
            )
        jobs_environment.environment(
            jobs_environment.EnvironmentFiles(
                users=[str(tmp_path / f"{user}.json") for user in (0, 1)],
                data=str(tmp_path / "data.json"),
                report=str(tmp_path / "report.parquet"),
            ),
            RunKeys(benchmark="gen"),
        )
        return json.loads((tmp_path / "data.json").read_text())

    data = generate()
    validate_data(data)
    users = read_environment(tmp_path / "data.json")
    assert [len(u.periods) for u in users] == [3, 3]  # period 0 + num_periods
    assert [len(u.questions) for u in users] == [3, 3]
    for user in data:
        assert user["start_time"] == "2020-10-01"
        assert [p["period_end"] for p in user["periods"]] == [
            "2020-10-01",
            "2021-01-01",
            "2021-04-01",
        ]
        # v1.base: 4 +- 1 changes per update period (capped by the schema's size), counted up
        changes = [len(p["updates"]) for p in user["periods"][1:]]
        assert all(1 <= n <= 5 for n in changes)
        assert sum(user["periods"][-1]["update_cnts"].values()) == sum(changes)
        for qa in user["qas"]:
            assert len(qa["answer_choices"]) >= 4  # min_state_variants
    report = pd.read_parquet(tmp_path / "report.parquet")
    assert len(report) == 14 and not report["reused"].any() and not report["failed"].any()

    again = generate()
    assert again == data  # the checkpoints give the same users, byte for byte
    report = pd.read_parquet(tmp_path / "report.parquet")
    assert report["reused"].all() and report["calls"].sum() == 0


def test_a_refine_reply_is_its_non_empty_text_under_the_stage_key():
    assert refined_text("query")({"query": "  Where now?  "}) == "Where now?"
    for reply in ({"query": " "}, {"answer": "x"}, "text", {"query": 3}):
        with pytest.raises(
            InvalidReply, match=r'^the reply must be \{"query": "non-empty text"\}$'
        ):
            refined_text("query")(reply)


class RecordingGateway:
    """Answers every request with ``reply``, keeping the requests."""

    def __init__(self, reply: str):
        self.reply, self.requests = reply, []

    async def chat(self, request, parse=None):
        self.requests.append(request)
        parsed = parse(self.reply) if parse is not None else None
        return Reply(self.reply, "m", 1, 1, 0.0, False, parsed=parsed)


def test_a_call_sends_its_role_task_and_formatted_template():
    call = Call("generator_low", "env-thing", "Pick {count} of {what}.")
    gateway = RecordingGateway('{"picked": "two"}')
    ctx = StageContext(gateway, {}, "u0", 1, StageLog("thing"))
    validated = call.ask(
        ctx, fields={"n": 2}, validate=lambda reply: reply["picked"], count=2, what="these"
    )
    assert asyncio.run(validated) == "two"
    checked = call.ask(ctx, fields={"n": 3}, parse=str.upper, count=3, what="those")
    assert asyncio.run(checked) == '{"PICKED": "TWO"}'
    first, second = gateway.requests
    assert (first.role, first.task, second.task) == ("generator_low", "env-thing", "env-thing")
    assert first.messages == [{"role": "user", "content": "Pick 2 of these."}]
    assert first.fields == {"n": 2, "errors": []} and first.response_format == {
        "type": "json_object"
    }
    assert second.messages == [{"role": "user", "content": "Pick 3 of those."}]
    assert second.fields == {"n": 3} and second.response_format is None
    assert (ctx.log.asks, ctx.log.calls) == (1, 2)
