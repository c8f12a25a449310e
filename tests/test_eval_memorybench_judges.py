"""MemoryBench judge metrics: worked examples, strict parsing, re-asks, and counted failures."""

from __future__ import annotations

import json

import pytest

from mnemoflow.eval.memorybench import checklist_judge, limitgen, writingbench_critic
from mnemoflow.eval.memorybench.judged_score import single_integer
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import UnparseableReply
from tests.scripted_backend import replies, run, scripted_gateway

CHECKLIST = ["Is it a poem?", "Does it mention the sea?", "Does it rhyme?"]


def entries(*scores) -> str:
    return json.dumps(
        [{"checklist_id": i, "reason": "r", "evaluation_score": s} for i, s in enumerate(scores)]
    )


# --- HelloBench checklist ----------------------------------------------------------------------


def test_checklist_mean_of_point_scores():
    # scores "0.75", 1, 0.25 (strings are accepted, as the reference's float() does): mean 2/3
    gateway, backend = scripted_gateway(replies(entries("0.75", 1, 0.25)))
    score = run(checklist_judge.checklist_score(gateway, "Write a poem", "Waves...", CHECKLIST))
    assert (score.metric, score.value, score.parse_ok) == ("avg_score", pytest.approx(2 / 3), True)
    assert score.details["checklist_scores"] == [0.75, 1.0, 0.25]
    assert len(backend.requests) == 1  # one call for all points
    prompt = backend.requests[0].messages[1]["content"]
    assert all(point in prompt for point in CHECKLIST) and "exactly 3 entries" in prompt


def test_checklist_accepts_a_fenced_python_list():
    reply = "```python\n[{'checklist_id': 0, 'reason': 'ok', 'evaluation_score': 0.5}]\n```"
    gateway, _ = scripted_gateway(replies(reply))
    score = run(checklist_judge.checklist_score(gateway, "i", "r", ["one point"]))
    assert (score.value, score.parse_ok) == (0.5, True)


def test_checklist_wrong_length_is_reasked_then_parsed():
    gateway, backend = scripted_gateway(replies(entries(1, 1), entries(0, 0.5, 1)))
    score = run(checklist_judge.checklist_score(gateway, "i", "r", CHECKLIST))
    assert (score.value, score.parse_ok, len(backend.requests)) == (0.5, True, 2)
    assert json.loads(score.raw_reply) == [entries(1, 1), entries(0, 0.5, 1)]


def test_checklist_never_parsed_is_a_counted_failure_not_zero():
    gateway, backend = scripted_gateway(replies(entries(0.6, 1, 1)))  # 0.6 is not a level
    score = run(checklist_judge.checklist_score(gateway, "i", "r", CHECKLIST))
    assert (score.value, score.parse_ok) == (None, False)
    assert len(backend.requests) == 3  # first ask + max_parse_retries (2)
    totals = gateway.ledger.totals()
    assert (totals.reasks, totals.parse_failures) == (2, 1)


@pytest.mark.parametrize(
    "reply",
    ["The response is good.", "", '{"evaluation_score": 1}', entries(1, 1, "high")],
)
def test_checklist_parser_rejects_malformed_replies(reply):
    with pytest.raises(UnparseableReply):
        checklist_judge.parser(3)(reply)


def test_checklist_points_from_dicts():
    points = [{"checklist_id": 0, "checklist_content": "Is it short?", "weight": 1}, "Plain?"]
    assert checklist_judge.checklist_texts(points) == ["Is it short?", "Plain?"]


# --- WritingBench critic -----------------------------------------------------------------------


def test_critic_reads_a_fenced_json_score():
    gateway, backend = scripted_gateway(replies('```json\n{"score": 8, "reason": "solid"}\n```'))
    score = run(writingbench_critic.critic_score(gateway, "q", "resp", [{"name": "Clarity"}]))
    assert (score.metric, score.value, score.parse_ok) == ("score", 8.0, True)
    request = backend.requests[0]
    assert request.role == "critic" and request.messages[1]["content"].count("Clarity") == 2


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"score": 7.0, "reason": "x"}', 7),
        ('{"score": 10, "reason": "x"}', 10),
    ],
)
def test_critic_parser_accepts(reply, expected):
    assert writingbench_critic.parse_critic(reply) == expected


@pytest.mark.parametrize(
    "reply",
    [
        '{"score": 11, "reason": "x"}',
        '{"score": 0, "reason": "x"}',
        '{"score": 7.5, "reason": "x"}',
        '{"score": 7}',
        '{"score": "7", "reason": "x"}',
        '{"score": 7, "reason": 3}',
        "Score: 7",
        # JSON numbers Python reads as inf / nan: int(inf) raised OverflowError (a crash, not
        # a re-ask)
        '{"score": 1e999, "reason": "x"}',
        '{"score": Infinity, "reason": "x"}',
        '{"score": NaN, "reason": "x"}',
    ],
)
def test_critic_parser_rejects(reply):
    with pytest.raises(UnparseableReply):
        writingbench_critic.parse_critic(reply)


def test_critic_role_takes_the_judge_binding_unless_bound():
    judge = {"base_url": "http://127.0.0.1:9/v1", "model": "j", "temperature": 0.0}
    gateway = Gateway.from_config({"judge": judge})
    critic_spec = gateway.specs["critic"]
    assert critic_spec.model == "j"
    # the spec names the judge's address redacted; the backend is given the real one
    assert gateway.addresses[critic_spec.base_url].url == "http://127.0.0.1:9/v1"
    critic = {"base_url": "http://127.0.0.1:8/v1", "model": "critic-7b", "temperature": 1.0}
    gateway = Gateway.from_config({"judge": judge, "critic": critic})
    assert (gateway.specs["critic"].model, gateway.specs["critic"].temperature) == (
        "critic-7b",
        1.0,
    )
    assert Gateway.from_config({}).specs["critic"].backend == "offline"


# --- LimitGen ----------------------------------------------------------------------------------

LIMITS = {
    "L1 lacks an ablation": ("yes", "4", '{"explanation": "close", "rating": 3}'),
    "L2 few baselines": ("yes", "1", '{"explanation": "never asked", "rating": 5}'),
    "L3 about prose": ("no", "4", '{"explanation": "never asked", "rating": 5}'),
    "L4 beyond the first three": ("yes", "4", '{"explanation": "never asked", "rating": 5}'),
}


def limitgen_script(request, n):
    limitation = request.fields["limitation"]
    aspect, subtype, rating = LIMITS[limitation]
    return {"limitgen_aspect": aspect, "limitgen_subtype": subtype}.get(request.task, rating)


def test_limitgen_rating_is_the_max_over_limitations_that_match_aspect_and_subtype():
    # error type "ablation": aspect experimental design, ground-truth subtype 4 (ablation study)
    # L1: yes, subtype 4 -> rated 3; L2: yes, subtype 1 (baselines) -> 0, its 5 never asked;
    # L3: aspect no -> 0; L4: not among the first three. rating = max(3, 0, 0) = 3.
    response = json.dumps({"limitations": list(LIMITS)})
    gateway, backend = scripted_gateway(limitgen_script)
    score = run(
        limitgen.limitgen_rating(gateway, response, {"category": "ablation", "ground_truth": "g"})
    )
    assert (score.value, score.parse_ok) == (3.0, True)
    assert score.details["ratings"] == [3, 0, 0]
    assert score.details["predicted_subtypes"] == ["ablation study", "insufficient baseline", None]
    assert score.details["accuracy"] is True
    tasks = [r.task for r in backend.requests]
    assert (tasks.count("limitgen_aspect"), tasks.count("limitgen_subtype")) == (3, 2)
    assert tasks.count("limitgen_rating") == 1


def test_limitgen_response_without_limitations_json_scores_zero_without_calls():
    gateway, backend = scripted_gateway(limitgen_script)
    score = run(limitgen.limitgen_rating(gateway, "1. data is small", {"category": "data"}))
    assert (score.value, score.parse_ok, backend.requests) == (0.0, True, [])


def test_limitgen_fenced_and_string_limitations():
    assert limitgen.limitations_of('```json\n{"limitations": "one"}\n```') == ["one"]
    assert limitgen.limitations_of('{"limitations": ["a", "b", "c", "d"]}') == ["a", "b", "c"]
    assert limitgen.limitations_of('{"limits": []}') is None


def test_limitgen_unparseable_judge_reply_fails_the_item():
    gateway, _ = scripted_gateway(replies("maybe"))
    response = json.dumps({"limitations": ["x"]})
    score = run(
        limitgen.limitgen_rating(gateway, response, {"category": "metric", "ground_truth": "g"})
    )
    assert (score.value, score.parse_ok) == (None, False)
    assert gateway.ledger.totals().parse_failures == 1


def test_limitgen_subtype_parser():
    parse = limitgen.subtype_parser(5)
    assert (parse("4"), parse("2. Limited datasets")) == (4, 2)
    for bad in ("6", "12", "none", ""):
        with pytest.raises(UnparseableReply):
            parse(bad)


def test_limitgen_unknown_error_type_is_a_one_line_error():
    gateway, _ = scripted_gateway(limitgen_script)
    with pytest.raises(ValueError, match="info.category must be one of"):
        run(limitgen.limitgen_rating(gateway, "{}", {"category": "typo"}))


# --- the shared 1-10 integer parser (fusion calls) ---------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("7", 7), ("**8**", 8), ("7/10", 7), ("Score: 9.", 9), (" 10\n", 10)]
    + [("On a scale of 1 to 10 I give 8", 8)],  # the reference's first-number rule reads 1
)
def test_single_integer_accepts(reply, expected):
    assert single_integer(reply, 1, 10) == expected


@pytest.mark.parametrize(
    "reply", ["", "good", "11", "0", "7.5", "Somewhere between 7 and 8.", "7 or 8"]
)
def test_single_integer_rejects(reply):
    with pytest.raises(UnparseableReply):
        single_integer(reply, 1, 10)


def test_provenance_names_prompt_versions_and_sampling_differences():
    from mnemoflow.eval.memorybench.memorybench_judges import judge_provenance

    judge = {"base_url": "http://127.0.0.1:9/v1", "model": "j", "temperature": 0.0}
    judge.update(max_tokens=1024, top_p=0.1)
    record = judge_provenance(Gateway.from_config({"judge": judge}))
    fusion = record["jrel_fusion"]
    assert (fusion["prompt_version"], fusion["model"], fusion["matches_reference"]) == (
        "jrel-fusion-v1",
        "j",
        True,
    )
    critic = record["writingbench_critic"]  # the critic takes the judge's binding: T 0, not 1.0
    assert (critic["role"], critic["matches_reference"]) == ("critic", False)
    assert critic["differs"]["temperature"] == {"reference": 1.0, "bound": 0.0}
    assert record["hellobench_checklist"]["prompt_version"] == "hellobench-checklist-v1"
