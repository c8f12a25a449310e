"""Structured output that degrades one form at a time, refusals read by what they say, and
deterministic errors that fail fast (``mnemoflow.llm.structured``, the gateway's ``auto`` path).

llama-cpp-python's server answers a ``response_format`` of type json_schema with HTTP 500 and a
request-validation error (``OpenAITestServer(response_formats=...)`` answers exactly that); it
takes json_object with the schema. vLLM without guided decoding answers any response_format with
HTTP 400 (``reject_response_format=True``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from mnemoflow.config_schema import check_config
from mnemoflow.errors import ConfigError
from mnemoflow.llm import structured
from mnemoflow.llm.gateway import Gateway, rejects_structured_output
from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import (
    OWN_BODY_FIELDS,
    ChatRequest,
    EndpointError,
    EndpointSpec,
    RejectedRequest,
)
from mnemoflow.report.summaries import LedgerFile, structured_forms
from mnemoflow.report.summary import models_markdown
from mnemoflow.testing.openai_server import LLAMA_CPP_REJECTED, OpenAITestServer
from tests.test_gateway_openai import run as chat_all

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
LLAMA_CPP = ("text", "json_object")  # the response_format types llama-cpp-python takes
#: What llama-cpp-python's server says to a json_schema (its HTTP 500 body's message).
LLAMA_MESSAGE = LLAMA_CPP_REJECTED.format(expected="'text' or 'json_object'", got="json_schema")


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch):
    monkeypatch.setattr(OpenAIBackend, "backoff_base", 0.01)


def gateway_for(url: str, cache=None, **binding) -> Gateway:
    spec = {"base_url": url, "model": "smol", "timeout": 5.0, **binding}
    return Gateway.from_config({role: spec for role in ("agent", "judge", "user")}, cache)


def asks(n: int, form=JSON_SCHEMA, role: str = "user") -> list[ChatRequest]:
    return [
        ChatRequest(role, "feedback", [{"role": "user", "content": f"q{i}"}], response_format=form)
        for i in range(n)
    ]


# ---- reading a refusal ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "detail", "field", "refuses"),
    [
        (500, LLAMA_MESSAGE, "response_format.type", True),  # llama-cpp-python
        (422, '{"detail": [{"loc": ["body", "response_format", "type"]}]}', None, True),
        (400, "response_format json_schema is not supported", "response_format", True),  # vLLM
        (404, "guided decoding is disabled", "response_format", True),  # any 4xx naming it
        (500, "1 validation error: {'loc': ('body', 'seed'), 'msg': 'bad'}", "seed", False),
        (500, "CUDA error while sampling with a grammar", "response_format", False),  # a crash
        (400, "maximum context length exceeded", None, False),
    ],
)
def test_a_refusal_is_read_by_what_it_says(status, detail, field, refuses):
    assert structured.refuses_structured_output(status, detail) is refuses
    if status != 422:
        assert structured.rejected_field(detail) == field
    else:
        assert structured.rejected_field(detail) == "response_format.type"


def test_the_ladder_steps_from_json_schema_to_json_object_with_the_schema_to_none():
    assert structured.ladder(JSON_SCHEMA) == [
        JSON_SCHEMA,
        {"type": "json_object", "schema": SCHEMA},
        None,
    ]
    assert structured.ladder({"type": "json_object"}) == [{"type": "json_object"}, None]
    assert structured.ladder(None) == [None]
    assert structured.weakest(["json_schema", "none", "json_object"]) == "none"
    assert structured.weakest(["json_object", "json_schema"]) == "json_object"


def test_the_key_that_sets_a_rejected_field():
    key = structured.config_key
    assert key("user", "response_format.type", OWN_BODY_FIELDS, None) == (
        "models.user.structured_output"
    )
    assert key("agent", "seed", OWN_BODY_FIELDS, None) == "models.agent.seed"
    assert key("agent", "top_k", OWN_BODY_FIELDS, {"top_k": 5}) == "models.agent.extra_body.top_k"
    assert key("agent", "messages.0.content", OWN_BODY_FIELDS, None) is None


# ---- the backend: never retried as transient ---------------------------------------------------


def test_llama_cpp_refusal_is_not_retried_and_on_fails_in_one_line():
    with OpenAITestServer(response_formats=LLAMA_CPP) as server:
        gateway = gateway_for(server.base_url, structured_output="on")
        with pytest.raises(RejectedRequest) as caught:
            chat_all(gateway, asks(1))
        stats = server.stats()
    assert (stats.total, stats.faults["response_format"]) == (1, 1)  # no retry
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"models.user (smol at 127.0.0.1:{server.port}): HTTP 500")
    assert "/v1" not in message.split(":", 3)[2]  # the host, not the URL
    assert "rejects response_format.type (set by models.user.structured_output)" in message
    assert rejects_structured_output(caught.value)
    assert gateway.ledger.totals().errors == 1


class _Validating:
    """A server whose every chat request fails with the same request-validation error on
    ``seed`` (HTTP 500, as llama-cpp-python words any validation error); counts requests."""

    MESSAGE = (
        "1 validation error:\n  {'type': 'int_type', 'loc': ('body', 'seed'), 'msg': "
        "'Input should be a valid integer', 'input': 'x'}\n"
    )

    def __init__(self):
        self.requests = 0

    async def __aenter__(self) -> str:
        async def chat(request: web.Request) -> web.Response:
            self.requests += 1
            payload = {"error": {"message": self.MESSAGE, "type": "internal_server_error"}}
            return web.json_response(payload, status=500)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


def test_a_repeated_validation_error_is_retried_once_and_names_the_field_and_key():
    server = _Validating()

    async def main():
        async with server as url:
            gateway = gateway_for(url, max_retries=6)
            try:
                return await gateway.chat(asks(1, None, role="agent")[0])
            finally:
                await gateway.aclose()

    with pytest.raises(EndpointError) as caught:
        asyncio.run(main())
    assert server.requests == 2  # one retry, not six
    message = str(caught.value)
    assert "\n" not in message
    assert re.match(
        r"models\.agent \(smol at 127\.0\.0\.1:\d+\): HTTP 500, the same request-validation "
        r"error twice, rejects seed \(set by models\.agent\.seed\)",
        message,
    )


# ---- the gateway: one form at a time, remembered, cached ---------------------------------------


def test_llama_cpp_gets_json_object_with_the_schema_and_a_rerun_makes_no_request(tmp_path):
    sent: list[dict | None] = []

    def reply(body):
        sent.append(body.get("response_format"))
        return '{"a": "x"}'

    with OpenAITestServer(reply=reply, response_formats=LLAMA_CPP, latency=0.02) as server:
        first = gateway_for(server.base_url, tmp_path / "cache", concurrency=4)
        replies = chat_all(first, asks(6))
        stats = server.stats()
        assert stats.faults["response_format"] == 1  # one refused request, then none
        assert stats.total == 7
        assert sent == [{"type": "json_object", "schema": SCHEMA}] * 6
        totals = first.ledger.totals()
        assert (totals.structured_output_fallbacks, totals.errors, totals.calls) == (1, 0, 6)
        assert first.ledger.to_dict()["structured_output"] == {"user": "json_object"}

        server.reset()
        rerun = gateway_for(server.base_url, tmp_path / "cache", concurrency=4)
        again = chat_all(rerun, asks(6))
        assert server.stats().total == 0
    assert all(r.cache_hit for r in again) and [r.text for r in again] == [r.text for r in replies]
    assert rerun.ledger.totals().structured_output_fallbacks == 1
    assert rerun.ledger.to_dict()["structured_output"] == {"user": "json_object"}
    # a planner looks up the form the cache says the run sends
    sent = asks(1, {"type": "json_object", "schema": SCHEMA})[0]
    assert rerun.sent_key(asks(1)[0]) == rerun.request_key(sent)


def test_an_endpoint_without_any_form_steps_down_twice_then_sends_none(tmp_path):
    with OpenAITestServer(reject_response_format=True) as server:
        gateway = gateway_for(server.base_url, tmp_path / "cache", concurrency=2)
        replies = chat_all(gateway, asks(4))
        assert server.stats().faults["response_format"] == 2  # json_schema, json_object
        assert server.stats().total == 6
        server.reset()
        rerun = gateway_for(server.base_url, tmp_path / "cache")
        chat_all(rerun, asks(4))
        assert server.stats().total == 0
    assert all(r.text.startswith("echo: q") for r in replies)
    for ledger in (gateway.ledger, rerun.ledger):
        assert ledger.totals().structured_output_fallbacks == 2
        assert ledger.to_dict()["structured_output"] == {"user": "none"}


def test_json_object_requests_keep_their_form_on_llama_cpp():
    with OpenAITestServer(reply="{}", response_formats=LLAMA_CPP) as server:
        gateway = gateway_for(server.base_url)
        chat_all(gateway, asks(2, {"type": "json_object"}, role="agent"))
        assert not server.stats().faults
    assert gateway.ledger.totals().structured_output_fallbacks == 0
    assert gateway.ledger.to_dict()["structured_output"] == {"agent": "json_object"}


def test_the_models_table_shows_each_roles_form():
    ledgers = [
        LedgerFile("a", {"structured_output": {"user": "json_object"}}),
        LedgerFile("b", {"structured_output": {"user": "json_object", "agent": "none"}}),
        LedgerFile("c", {}),
    ]
    forms = structured_forms(ledgers)
    assert forms == {"agent": "none", "user": "json_object"}
    models = {r: {"backend": "openai", "model": "smol"} for r in ("agent", "judge", "user")}
    table = "\n".join(models_markdown(models, forms))
    assert "| structured output |" in table.replace("|  ", "| ")
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if "smol" in line}
    assert "json_object" in rows["user"] and "none" in rows["agent"] and "–" in rows["judge"]


# ---- values YAML can write ---------------------------------------------------------------------


def with_binding(role: str, binding: dict) -> dict:
    """The default config.yaml with ``models.<role>`` replaced by ``binding``."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    config["models"][role] = binding
    return config


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("structured_output: off", "off"),
        ("structured_output: on", "on"),
        ("structured_output: false", "off"),
        ("structured_output: true", "on"),
        ("structured_output: 'off'", "off"),
        ("structured_output: auto", "auto"),
    ],
)
def test_unquoted_on_and_off_are_accepted(text, value, repo):
    binding = {"base_url": "http://h:1/v1", "model": "m", **yaml.safe_load(text)}
    assert EndpointSpec.from_config("user", binding).structured_output == value
    check_config(with_binding("user", binding), repo / "schemas" / "config.schema.yaml")


def test_other_values_still_fail_in_one_line(repo):
    with pytest.raises(ConfigError, match=r"models\.user\.structured_output: one of"):
        EndpointSpec.from_config("user", {"structured_output": "sometimes"})
    with pytest.raises(ConfigError, match=r"config models\.user\.structured_output"):
        check_config(
            with_binding("user", {"structured_output": 1}), repo / "schemas" / "config.schema.yaml"
        )


def _yaml_blocks_setting(key: str) -> list[tuple[str, str]]:
    """Every fenced YAML example in README.md and docs/*.md that sets ``key``."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```ya?ml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if re.search(rf"\b{key}\s*:", block):
                found.append((page.name, block))
    return found


def test_the_docs_yaml_examples_of_on_off_keys_load_and_validate(repo):
    blocks = _yaml_blocks_setting("structured_output")
    assert len(blocks) >= 2, blocks  # docs/gateway.md's and docs/feedback.md's at least
    schema = repo / "schemas" / "config.schema.yaml"
    for page, block in blocks:
        config = yaml.safe_load(block)
        for role, binding in (config.get("models") or {}).items():
            if isinstance(binding, dict) and "structured_output" in binding:
                check_config(with_binding(role, binding), schema)
                spec = EndpointSpec.from_config(role, binding)
                assert spec.structured_output in ("auto", "on", "off"), page
