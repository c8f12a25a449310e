"""Reasoning models and structured output: ``models.<role>.strip_reasoning``, ``extra_body`` and
``structured_output`` against the local test server (``think=...``, ``reject_response_format``).

Every parser below would read the server's wrong draft if the thinking reached it; the test
server counts on its side that a fallback costs one refused request per job and a rerun none.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.config_schema import check_config
from mnemoflow.environment.base import StageContext, StageLog, ask_validated
from mnemoflow.errors import ConfigError
from mnemoflow.eval.amemgym.amemgym_replies import parse_answer
from mnemoflow.eval.memorybench import synthetic_feedback
from mnemoflow.eval.static_qa.judges import parse_correct_wrong, verdict_parser
from mnemoflow.llm.gateway import Gateway, strip_reasoning
from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import ChatRequest, EndpointError, EndpointSpec
from mnemoflow.memory.writer import loads_json
from mnemoflow.protocols.conversation import Turn
from mnemoflow.protocols.feedback import FeedbackConfig
from mnemoflow.simulators.feedback import FeedbackSimulator, parse_feedback
from mnemoflow.testing.openai_server import OpenAITestServer, original_body

FEEDBACK = json.dumps(
    {
        "reasoning": "matches the reference",
        "implicit_action": "like",
        "behavior": "end_conversation",
        "response": "Thanks!",
    }
)
#: prompt -> the server's answer (after its thinking), and the parser that must read it.
CASES = {
    "amemgym": ('```json\n{"answer": 3}\n```', lambda t: parse_answer(t, 4), 3),
    "judge": ("CORRECT", verdict_parser(parse_correct_wrong), 1.0),
    "writer": ('{"facts": ["likes tea"]}', loads_json, {"facts": ["likes tea"]}),
    "user": (FEEDBACK, lambda t: parse_feedback(t)["implicit_action"], "like"),
}


def answer(body: dict) -> str:
    prompt = original_body(body)["messages"][-1]["content"]
    return CASES[prompt.split()[0]][0] if prompt.split()[0] in CASES else f"echo: {prompt}"


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch):
    monkeypatch.setattr(OpenAIBackend, "backoff_base", 0.01)


def gateway_for(server: OpenAITestServer, cache=None, **binding) -> Gateway:
    spec = {"base_url": server.base_url, "model": "qwen3", "timeout": 5.0, **binding}
    return Gateway.from_config({role: spec for role in ("agent", "judge", "user")}, cache)


def ask(prompt: str, role: str = "agent", response_format=None) -> ChatRequest:
    messages = [{"role": "user", "content": prompt}]
    return ChatRequest(role, "task", messages, response_format=response_format)


def chat_all(gateway: Gateway, asks: list[tuple[ChatRequest, object]]):
    async def main():
        try:
            return await asyncio.gather(*(gateway.chat(r, parse=p) for r, p in asks))
        finally:
            await gateway.aclose()

    return asyncio.run(main())


# ---- strip_reasoning ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("<think>draft {1}</think>\n\nanswer", "answer"),
        ("  \n<think>\na\n</think>answer  ", "answer  "),
        ("<think>ran out of tokens {", ""),  # unterminated: all thinking, an empty reply
        ("opened in the prompt</think>\nanswer", "answer"),  # R1-style: only the close
        ("answer", "answer"),
        ("answer <think>quoted</think> more", "answer <think>quoted</think> more"),
        ("", ""),
    ],
)
def test_strip_reasoning_removes_only_the_leading_thinking(raw, text):
    assert strip_reasoning(raw) == text


def test_parsers_read_the_answer_not_the_draft_in_the_thinking(tmp_path):
    with OpenAITestServer(reply=answer, think="inline") as server:
        gateway = gateway_for(server, tmp_path / "cache")
        asks = [(ask(f"{name} question"), parse) for name, (_, parse, _) in CASES.items()]
        replies = chat_all(gateway, asks)
        assert server.stats().total == len(CASES)  # no re-ask was needed
    assert [r.parsed for r in replies] == [want for _, _, want in CASES.values()]
    assert all(r.parse_ok and "<think>" not in r.text for r in replies)
    assert gateway.ledger.totals().parse_failures == 0
    assert gateway.ledger.totals().reasks == 0
    assert all(r.raw_replies[0].startswith("<think>") for r in replies)  # the record keeps it
    # Without stripping, the same cached replies (no new call) are read wrong or not at all.
    with OpenAITestServer(reply=answer, think="inline") as server:
        raw = gateway_for(server, tmp_path / "cache", strip_reasoning=False, max_parse_retries=0)
        kept = chat_all(raw, asks)
        assert server.stats().total == 0
    assert all(r.cache_hit and r.text.startswith("<think>") for r in kept)
    assert [r.parsed for r in kept] != [want for _, _, want in CASES.values()]


def test_reasoning_content_is_never_the_content():
    with OpenAITestServer(reply=answer, think="field") as server:
        gateway = gateway_for(server)
        (reply,) = chat_all(gateway, [(ask("judge q"), verdict_parser(parse_correct_wrong))])
    assert (reply.text, reply.parsed) == ("CORRECT", 1.0)


def test_the_feedback_user_parses_through_thinking_and_without_structured_output():
    item = {
        "question_id": "q1",
        "dataset": "synthetic",
        "question": "Which font?",
        "answer": "Garamond",
        "lang": "en",
    }
    history = [Turn("user", "Which font?"), Turn("assistant", "Garamond")]
    with OpenAITestServer(reply=FEEDBACK, think="inline", reject_response_format=True) as server:
        gateway = gateway_for(server)
        simulator = FeedbackSimulator(item, gateway, user=synthetic_feedback.simulated_user("x"))
        turn = asyncio.run(simulator.reply(history))
        asyncio.run(gateway.aclose())
        stats = server.stats()
    assert (turn.implicit_action, turn.terminated, turn.content) == ("like", True, "Thanks!")
    assert simulator.parse_failures == 0
    # json_schema, then json_object (with the schema): refused; then none
    assert stats.faults["response_format"] == 2
    assert gateway.ledger.totals().structured_output_fallbacks == 2
    assert gateway.ledger.to_dict()["structured_output"] == {"user": "none"}


# ---- extra_body -----------------------------------------------------------------------------


def test_extra_body_reaches_the_server_and_the_cache_key(tmp_path):
    bodies: list[dict] = []
    extra = {"chat_template_kwargs": {"enable_thinking": False}}

    def reply(body):
        bodies.append(body)
        return "fine"

    with OpenAITestServer(reply=reply) as server:
        plain = gateway_for(server, tmp_path / "cache")
        chat_all(plain, [(ask("q"), None)])
        gateway = gateway_for(server, tmp_path / "cache", extra_body=extra)
        (again,) = chat_all(gateway, [(ask("q"), None)])
    assert "chat_template_kwargs" not in bodies[0]
    assert bodies[1]["chat_template_kwargs"] == {"enable_thinking": False}
    assert not again.cache_hit  # another request, another entry
    assert gateway.request_key(ask("q")) != plain.request_key(ask("q"))
    assert gateway.describe()["agent"]["extra_body"] == extra


@pytest.mark.parametrize(
    ("binding", "named"),
    [
        ({"extra_body": {"temperature": 0.7}}, "models.agent.extra_body.temperature"),
        ({"extra_body": {"response_format": {}}}, "models.agent.structured_output"),
        ({"extra_body": {"headers": {"api_key": "sk-x"}}}, "extra_body.headers.api_key"),
        ({"extra_body": ["not", "a", "mapping"]}, "models.agent.extra_body"),
        ({"strip_reasoning": "yes"}, "models.agent.strip_reasoning"),
        ({"structured_output": "sometimes"}, "models.agent.structured_output"),
    ],
)
def test_bad_new_keys_fail_in_one_line_naming_the_key(binding, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as caught:
        EndpointSpec.from_config("agent", {"base_url": "http://h/v1", "model": "m", **binding})
    assert "\n" not in str(caught.value) and "sk-x" not in str(caught.value)


def test_extra_body_needs_a_request_body_to_go_in():
    with pytest.raises(ConfigError, match=r"models\.judge\.extra_body: only the openai backend"):
        EndpointSpec.from_config("judge", {"extra_body": {"chat_template_kwargs": {}}})


def test_extra_body_names_like_skip_special_tokens_are_not_secrets():
    spec = EndpointSpec.from_config(
        "agent", {"base_url": "http://h/v1", "model": "m", "extra_body": {"skip_special_tokens": 0}}
    )
    assert spec.public()["extra_body"] == {"skip_special_tokens": 0}


# ---- structured_output ----------------------------------------------------------------------

SCHEMA = {"type": "json_object"}


def json_asks(n: int) -> list[tuple[ChatRequest, object]]:
    return [(ask(f"user {i}", "user", SCHEMA), None) for i in range(n)]


def test_auto_falls_back_once_per_job_and_a_rerun_is_all_cache_hits(tmp_path):
    with OpenAITestServer(reject_response_format=True, latency=0.02) as server:
        first = gateway_for(server, tmp_path / "cache", concurrency=4)
        replies = chat_all(first, json_asks(6))
        stats = server.stats()
        assert stats.faults["response_format"] == 1  # one refused request, then none sent
        assert stats.total == 7
        totals = first.ledger.totals()
        assert (totals.structured_output_fallbacks, totals.errors, totals.calls) == (1, 0, 6)
        assert all(r.text.startswith("echo: user") for r in replies)

        rerun = gateway_for(server, tmp_path / "cache", concurrency=4)
        again = chat_all(rerun, json_asks(6))
        assert server.stats().total == 7  # no request at all
    assert all(r.cache_hit for r in again)
    assert [r.text for r in again] == [r.text for r in replies]
    assert rerun.ledger.totals().structured_output_fallbacks == 1  # same ledger, from the cache


def test_auto_keeps_response_format_where_the_endpoint_takes_it():
    bodies: list[dict] = []

    def reply(body):
        bodies.append(body)
        return "{}"

    with OpenAITestServer(reply=reply) as server:
        gateway = gateway_for(server)
        chat_all(gateway, json_asks(3))
    assert [b.get("response_format") for b in bodies] == [SCHEMA] * 3
    assert gateway.ledger.totals().structured_output_fallbacks == 0


def test_off_never_sends_it_and_on_fails_as_before():
    with OpenAITestServer(reject_response_format=True) as server:
        off = gateway_for(server, structured_output="off")
        chat_all(off, json_asks(2))
        assert server.stats().faults["response_format"] == 0
        on = gateway_for(server, structured_output="on", max_retries=0)
        with pytest.raises(EndpointError, match="HTTP 400.*response_format") as caught:
            chat_all(on, json_asks(1))
    assert "\n" not in str(caught.value)
    assert off.ledger.totals().structured_output_fallbacks == 0


def test_another_bad_request_is_not_taken_for_a_missing_feature():
    with OpenAITestServer(faults=["400"]) as server:
        gateway = gateway_for(server)
        with pytest.raises(EndpointError, match="HTTP 400"):
            chat_all(gateway, json_asks(1))
    assert gateway.ledger.totals().structured_output_fallbacks == 0
    assert gateway.ledger.totals().errors == 1


# ---- the old switch -------------------------------------------------------------------------


def test_the_old_feedback_switch_names_the_new_key(repo):
    with pytest.raises(ConfigError, match=r"models\.user\.structured_output"):
        FeedbackConfig.from_spec({"feedback": {"structured_output": False}})
    config = {"benchmarks": {"mb": {"loader": "memorybench", "feedback": {"structured_output": 0}}}}
    with pytest.raises(ConfigError, match=r"benchmarks\.mb\.feedback.*models\.user\.structured"):
        check_config(config, repo / "schemas" / "config.schema.yaml")


def test_an_environment_stage_asks_through_thinking_and_a_refused_json_object():
    """AMemGym's generation stages ask with ``{"type": "json_object"}`` (``ask_validated``)."""
    reply = '{"questions": ["What do you drink?"]}'
    with OpenAITestServer(reply=reply, think="inline", reject_response_format=True) as server:
        gateway = gateway_for(server)
        ctx = StageContext(gateway, {}, "u1", 0, StageLog("questions"))

        async def main():
            try:
                return await ask_validated(
                    ctx, role="agent", task="t", prompt="p", fields={}, validate=lambda r: r
                )
            finally:
                await gateway.aclose()

        value = asyncio.run(main())
    assert value == {"questions": ["What do you drink?"]}
    assert (ctx.log.calls, ctx.log.validation_failures) == (1, [])
    assert gateway.ledger.totals().structured_output_fallbacks == 1


def test_the_sent_key_drops_response_format_where_the_role_never_sends_it():
    """A planner looks up what the run will cache: with ``structured_output: off`` the request
    goes out (and is cached) without its ``response_format``."""
    import dataclasses

    from mnemoflow.llm.gateway import Gateway
    from mnemoflow.llm.types import ChatRequest

    request = ChatRequest(
        role="agent",
        task="t",
        messages=[{"role": "user", "content": "hi"}],
        response_format={"type": "json_object"},
    )
    plain = dataclasses.replace(request, response_format=None)
    for mode, sent in (("off", plain), ("on", request), ("auto", request)):
        spec = {"base_url": "http://x:1/v1", "model": "m", "structured_output": mode}
        gateway = Gateway.from_config({"agent": spec})
        assert gateway.sent_key(request) == gateway.request_key(sent), mode
