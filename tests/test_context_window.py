"""Context windows: a prompt that does not fit is refused before the call or cut oldest-first,
never sent whole (issue 20, item 4). Counted on the test server's side too."""

from __future__ import annotations

import asyncio

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.context import fit, fits, item_scope, prompt_tokens
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest, ContextOverflow, EndpointSpec, ItemOverflow
from mnemoflow.testing.openai_server import OpenAITestServer

WINDOW = 300
MAX_TOKENS = 50


def conversation(turns: int) -> list[dict[str, str]]:
    """A system prompt, ``turns`` earlier exchanges of ~40 tokens a message, then the prompt."""
    history = [
        {"role": role, "content": f"turn {i} " + "lorem ipsum dolor sit amet " * 7}
        for i in range(turns)
        for role in ("user", "assistant")
    ]
    return [{"role": "system", "content": "Be brief."}, *history, {"role": "user", "content": "Q?"}]


def spec(**overrides) -> EndpointSpec:
    raw = {"base_url": "http://127.0.0.1:9/v1", "model": "some-model", "max_tokens": MAX_TOKENS}
    return EndpointSpec.from_config("agent", {"context_window": WINDOW, **raw, **overrides})


def windowed(server: OpenAITestServer, tmp_path, overflow: str) -> Gateway:
    """The agent on the test server with the small window and the given ``overflow``."""
    binding = {"base_url": server.base_url, "model": "m", "context_window": WINDOW,
               "max_tokens": MAX_TOKENS, "overflow": overflow}  # fmt: skip
    return Gateway.from_config({"agent": binding}, tmp_path / "cache")


def ask(gateway: Gateway, request: ChatRequest, item: str):
    async def main():
        async with gateway:
            with item_scope(item):
                return await gateway.chat(request)

    return asyncio.run(main())


def test_fits_reports_the_tokens_asked_for_and_the_window():
    request = ChatRequest("agent", "answer", conversation(1))
    tokens, window = fits(request, spec())
    assert window == WINDOW
    assert tokens == prompt_tokens(request.messages, "openai") + MAX_TOKENS
    # no setting: the shipped table's window for a model it lists; unknown otherwise
    table = EndpointSpec.from_config("agent", {"base_url": "http://h/v1", "model": "gpt-4o-mini"})
    assert fits(request, table)[1] == 128000
    unlisted = EndpointSpec.from_config("agent", {"base_url": "http://h/v1", "model": "mine"})
    assert fits(request, unlisted)[1] is None
    assert fits(request, EndpointSpec(role="agent"))[1] is None  # offline: no window


def test_overflow_fail_fails_the_item_before_the_call_and_names_it(tmp_path):
    request = ChatRequest("agent", "answer", conversation(10))
    with OpenAITestServer() as server:
        gateway = windowed(server, tmp_path, "fail")
        reply = ask(gateway, request, "question q-17")
        fitting = ask(gateway, ChatRequest("agent", "answer", conversation(1)), "question q-18")
        stats = server.stats()
    assert not reply.parse_ok and reply.text == "" and reply.raw_replies == []
    assert fitting.parse_ok and fitting.text == "echo: Q?"  # the next item goes on
    message = reply.failure
    entry = gateway.ledger.entries["agent/answer"]
    assert entry.overflow_failures == 1 and entry.calls == 1
    assert gateway.ledger.to_dict()["failed_items"] == {"question q-17": message}
    assert sum(stats.attempts.values()) == 1  # only the prompt that fits was sent
    assert "\n" not in message and "overflow: fail" in message
    assert message.startswith("models.agent (m), task answer, question q-17: prompt ")
    needed = prompt_tokens(request.messages, "openai") + MAX_TOKENS
    assert f"max_tokens {MAX_TOKENS} = {needed} tokens > context_window {WINDOW}" in message


def test_overflow_abort_stops_before_the_call_in_one_line(tmp_path):
    request = ChatRequest("agent", "answer", conversation(10))
    with OpenAITestServer() as server:
        gateway = windowed(server, tmp_path, "abort")
        with pytest.raises(ContextOverflow) as caught:
            ask(gateway, request, "question q-17")
        stats = server.stats()
    assert not isinstance(caught.value, ItemOverflow)
    assert str(caught.value).startswith("models.agent (m), task answer, question q-17: prompt ")
    assert "overflow: abort" in str(caught.value)
    assert sum(stats.attempts.values()) == 0  # nothing was sent


def test_truncate_oldest_drops_the_oldest_history_until_it_fits_and_counts_it(tmp_path):
    request = ChatRequest("agent", "answer", conversation(10))
    with OpenAITestServer() as server:
        gateway = windowed(server, tmp_path, "truncate_oldest")
        reply = ask(gateway, request, "user 3")
        stats = server.stats()
    assert reply.text == "echo: Q?"
    assert sum(stats.answered.values()) == 1
    entry = gateway.ledger.entries["agent/answer"]
    assert entry.truncated_calls == 1 and entry.truncated_messages > 0
    assert gateway.ledger.truncated_items == {"user 3": entry.truncated_messages}
    kept, dropped = fit(request, gateway.specs["agent"])
    assert dropped == entry.truncated_messages
    assert kept.messages[0] == request.messages[0]  # the system prompt stays
    assert kept.messages[-1] == request.messages[-1]  # so does the prompt
    assert kept.messages[1:-1] == request.messages[1 + dropped : -1]  # the newest history
    assert fits(kept, gateway.specs["agent"])[0] <= WINDOW
    assert (
        fits(dataclass_with(kept, request.messages[dropped:]), gateway.specs["agent"])[0] > WINDOW
    )
    assert gateway.ledger.to_dict()["truncated_items"] == {"user 3": dropped}


def dataclass_with(request: ChatRequest, messages: list[dict[str, str]]) -> ChatRequest:
    """The request keeping one more history message than ``fit`` did (system prompt kept)."""
    return ChatRequest(request.role, request.task, [request.messages[0], *messages])


def test_the_callers_default_applies_unless_the_role_sets_overflow():
    request = ChatRequest("agent", "act", conversation(10), overflow="truncate_oldest")
    assert fit(request, spec())[1] > 0  # the caller's family default: truncate
    with pytest.raises(ItemOverflow):
        fit(request, spec(overflow="fail"))  # the role's own setting wins
    with pytest.raises(ItemOverflow, match="not sent"):
        fit(ChatRequest("agent", "answer", conversation(10)), spec())  # no default: fail


def test_a_prompt_too_large_without_any_history_fails_even_when_truncating():
    messages = [{"role": "user", "content": "lorem ipsum " * 400}]
    with pytest.raises(ItemOverflow, match="with all 0 history messages dropped"):
        fit(ChatRequest("agent", "answer", messages), spec(overflow="truncate_oldest"))


def test_a_prompt_that_fits_is_sent_unchanged():
    request = ChatRequest("agent", "answer", conversation(1))
    assert fit(request, spec()) == (request, 0)


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (
            {"overflow": "drop"},
            "config models.agent.overflow: one of ['fail', 'truncate_oldest', 'abort']",
        ),
        ({"context_window": 0}, "config models.agent.context_window: a positive integer"),
        ({"backend": "offline", "context_window": 10}, "only the openai backend has one"),
    ],
)
def test_bad_settings_fail_in_one_line_naming_the_key(binding, message):
    raw = {"base_url": "http://h/v1", "model": "m", **binding}
    if binding.get("backend") == "offline":
        raw = binding
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        EndpointSpec.from_config("agent", raw)


def test_amemgyms_native_agent_truncates_by_default_the_others_fail(tmp_path):
    """The reference's native agent ran "with FIFO truncation after context overflow": with no
    ``overflow`` set, its growing history is cut oldest-first; a RAG agent's prompt fails."""
    from mnemoflow.agents.interactive import InteractiveAgent
    from mnemoflow.memory.base import build
    from mnemoflow.protocols.conversation import Turn

    long = "I moved to Lyon last spring and the flat has a balcony facing the river. " * 6
    with OpenAITestServer() as server:
        binding = {"base_url": server.base_url, "model": "m", "context_window": 400,
                   "max_tokens": MAX_TOKENS}  # fmt: skip
        for spec, fails in (({"type": "full_context", "max_tokens": 10**9}, False),
                            ({"type": "rag"}, True)):  # fmt: skip
            offline = Gateway.from_config({}, None)
            gateway = Gateway.from_config({"agent": binding}, tmp_path / spec["type"])
            agent = InteractiveAgent(build(spec, llm=offline), gateway)
            agent.begin_session("s0", "2025-01-01")

            async def chat(agent=agent, gateway=gateway):
                async with gateway:
                    with item_scope("user u1"):
                        for _ in range(4):
                            await agent.act([Turn("user", long)])

            if fails:  # the user's calls fail, named in the ledger; the conversation goes on
                asyncio.run(chat())
                assert list(gateway.ledger.failed_items) == ["user u1"]
                assert "task interactive_act, user u1: " in gateway.ledger.failed_items["user u1"]
                entry = gateway.ledger.entries["agent/interactive_act"]
                assert (entry.calls, entry.overflow_failures) == (2, 2)  # 2 fit, 2 grew too long
                continue
            asyncio.run(chat())
            assert gateway.ledger.entries["agent/interactive_act"].truncated_calls > 0
            assert set(gateway.ledger.truncated_items) == {"user u1"}
