"""Tool calls through the gateway: requested with ``tools``, returned as ``Reply.tool_calls``,
cached and counted like any reply, on the offline backend and on an OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import HANDLERS, OfflineBackendError, ToolCalls, handles
from mnemoflow.llm.types import ChatRequest
from mnemoflow.testing.openai_server import OpenAITestServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "extract_entities",
            "description": "Extract entities and their types.",
            "parameters": {
                "type": "object",
                "properties": {"entities": {"type": "array", "items": {"type": "object"}}},
                "required": ["entities"],
            },
        },
    }
]


def tool_request(text: str, tools=TOOLS, task: str = "test_tool_entities") -> ChatRequest:
    return ChatRequest(
        "memory_writer",
        task,
        [{"role": "user", "content": text}],
        fields={"text": text},
        tools=tools,
    )


@pytest.fixture
def offline_tool_task():
    @handles("test_tool_entities")
    def entities(fields):
        words = [w for w in fields["text"].split() if w[:1].isupper()]
        return ToolCalls(
            [
                {
                    "name": "extract_entities",
                    "arguments": {"entities": [{"entity": w} for w in words]},
                }
            ]
        )

    @handles("test_tool_unoffered")
    def unoffered(fields):
        return ToolCalls([{"name": "delete_everything", "arguments": {}}])

    yield
    HANDLERS.pop("test_tool_entities")
    HANDLERS.pop("test_tool_unoffered")


def chat(gateway: Gateway, request: ChatRequest):
    async def main():
        try:
            return await gateway.chat(request)
        finally:
            await gateway.aclose()

    return asyncio.run(main())


def test_offline_tool_calls_are_decoded_cached_and_counted(tmp_path, offline_tool_task):
    first = Gateway.from_config({}, tmp_path / "cache")
    reply = chat(first, tool_request("Alice met Bob in Paris"))
    assert reply.text == ""
    assert [c["name"] for c in reply.tool_calls] == ["extract_entities"]
    assert reply.tool_calls[0]["arguments"] == {
        "entities": [{"entity": "Alice"}, {"entity": "Bob"}, {"entity": "Paris"}]
    }
    assert reply.parsed == reply.tool_calls and reply.parse_ok
    first.close()
    again = Gateway.from_config({}, tmp_path / "cache")  # a rerun: served from the cache
    replay = chat(again, tool_request("Alice met Bob in Paris"))
    assert replay.cache_hit and replay.tool_calls == reply.tool_calls
    entry = again.ledger.to_dict()["by_role_task"]["memory_writer/test_tool_entities"]
    assert entry["calls"] == 1 and entry["cache_hits"] == 1
    again.close()


def test_tools_are_part_of_the_cache_key():
    gateway = Gateway.from_config({})
    plain = tool_request("x", tools=None)
    with_tools = tool_request("x")
    other = tool_request("x", tools=[{**TOOLS[0], "function": {**TOOLS[0]["function"]}}])
    other.tools[0]["function"]["name"] = "establish_relations"
    keys = {gateway.request_key(r) for r in (plain, with_tools, other)}
    assert len(keys) == 3
    assert gateway.request_key(with_tools) != gateway.request_key(
        ChatRequest(**{**with_tools.__dict__, "tool_choice": "required"})
    )


def test_the_body_and_the_cache_key_carry_the_same_request_options():
    from mnemoflow.llm.openai_backend import chat_body
    from mnemoflow.llm.types import EndpointSpec

    spec = EndpointSpec("agent", backend="openai", model="m", base_url="http://x/v1")
    fmt = {"type": "json_object"}
    request = ChatRequest(**{**tool_request("x").__dict__, "response_format": fmt})
    request.tool_choice = "auto"
    assert request.options() == {"response_format": fmt, "tools": TOOLS, "tool_choice": "auto"}
    body = chat_body(request, spec)
    assert list(body)[-3:] == ["response_format", "tools", "tool_choice"]
    assert {name: body[name] for name in request.options()} == request.options()
    # a tool choice without tools is not sent, and nothing unset is
    bare = ChatRequest(role="agent", task="t", messages=[], tool_choice="auto")
    assert bare.options() == {"tool_choice": "auto"}
    assert {"response_format", "tools", "tool_choice"}.isdisjoint(chat_body(bare, spec))


def test_offline_handler_may_not_call_a_tool_it_was_not_offered(offline_tool_task):
    with pytest.raises(OfflineBackendError, match="'delete_everything', which the request"):
        chat(Gateway.from_config({}), tool_request("x", task="test_tool_unoffered"))


def test_endpoint_tool_calls_round_trip_and_rerun_from_cache(tmp_path):
    bodies = []
    attempts = {"n": 0}

    def reply(body):
        bodies.append(body)
        attempts["n"] += 1
        if attempts["n"] == 1:  # a malformed call first: re-asked, never guessed
            return {"tool_calls": [{"name": "extract_entities", "arguments": "{not json"}]}
        return {"tool_calls": [{"name": "extract_entities", "arguments": {"entities": []}}]}

    with OpenAITestServer(reply=reply) as server:
        binding = {"memory_writer": {"base_url": server.base_url, "model": "m", "max_retries": 0}}
        gateway = Gateway.from_config(binding, tmp_path / "cache")
        got = chat(gateway, ChatRequest(**{**tool_request("hi").__dict__, "tool_choice": "auto"}))
        assert got.tool_calls == [
            {"id": "call_0", "name": "extract_entities", "arguments": {"entities": []}}
        ]
        assert got.attempts == 2 and got.parse_ok
        assert bodies[0]["tools"] == TOOLS and bodies[0]["tool_choice"] == "auto"
        reask = bodies[1]["messages"]
        assert reask[-2]["role"] == "assistant" and "{not json" in reask[-2]["content"]
        assert "not valid JSON" in reask[-1]["content"]
        entry = gateway.ledger.to_dict()["by_role_task"]["memory_writer/test_tool_entities"]
        assert entry["calls"] == 2 and entry["reasks"] == 1 and entry["parse_failures"] == 0
        gateway.close()
        rerun = Gateway.from_config(binding, tmp_path / "cache")
        again = chat(rerun, ChatRequest(**{**tool_request("hi").__dict__, "tool_choice": "auto"}))
        assert again.tool_calls == got.tool_calls and again.cache_hit
        assert len(bodies) == 2  # nothing new reached the endpoint
        rerun.close()


def test_a_text_reply_to_a_tools_request_is_kept_as_text(tmp_path):
    with OpenAITestServer(reply=lambda body: "no tool needed") as server:
        binding = {"memory_writer": {"base_url": server.base_url, "model": "m"}}
        gateway = Gateway.from_config(binding)
        got = chat(gateway, tool_request("hi"))
        assert got.text == "no tool needed" and got.tool_calls == [] and got.parse_ok
        assert json.loads(json.dumps(got.parsed)) == "no tool needed"
