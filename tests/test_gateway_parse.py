"""Re-asked parse failures: an unparseable or empty reply is never final, and never a guess."""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.llm.gateway import Gateway, original_messages, reask_messages, require_text
from mnemoflow.llm.types import ChatRequest, UnparseableReply, reply_json
from mnemoflow.testing.openai_server import OpenAITestServer

QUESTION = [{"role": "user", "content": "Pick an option."}]


def answer_of(text: str) -> int:
    try:
        value = json.loads(text)["answer"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UnparseableReply(str(exc)) from None
    if not isinstance(value, int):
        raise UnparseableReply(f"answer is {type(value).__name__}")
    return value


class Script:
    """Replies in turn from a list (the last one repeats); keeps every request body."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.bodies: list[dict] = []

    def __call__(self, body):
        self.bodies.append(body)
        return self.replies[min(len(self.bodies) - 1, len(self.replies) - 1)]


def deterministic(body) -> str:
    """A temperature-0 model: the same messages always get the same reply. It answers the bare
    question in prose, and in the asked-for JSON once told its reply could not be used."""
    told = body["messages"][-1]["content"].startswith("Your reply could not be used")
    return '{"answer": 2}' if told else "I think option two."


def ask(cache, server, parse, **params):
    gateway = Gateway.from_config(
        {"agent": {"base_url": server.base_url, "model": "m", **params}}, cache
    )

    async def main():
        try:
            return await gateway.chat(ChatRequest("agent", "choose", QUESTION), parse=parse)
        finally:
            await gateway.aclose()
            gateway.close()

    return asyncio.run(main()), gateway.ledger.totals()


def test_an_unparseable_reply_is_asked_again_and_the_parsed_one_returned(tmp_path):
    script = Script("I think option two.", '{"answer": 2}')
    with OpenAITestServer(reply=script) as server:
        reply, totals = ask(tmp_path / "c.sqlite", server, answer_of)
    assert (reply.parsed, reply.parse_ok, reply.attempts) == (2, True, 2)
    assert reply.raw_replies == ["I think option two.", '{"answer": 2}']
    assert (totals.calls, totals.reasks, totals.parse_failures) == (2, 1, 0)


def test_a_deterministic_endpoint_told_what_was_wrong_answers_the_reask(tmp_path):
    # Asked the identical messages again it would say "I think option two." three times.
    with OpenAITestServer(reply=deterministic) as server:
        reply, totals = ask(tmp_path / "c.sqlite", server, answer_of)
        assert server.stats().total == 2
    assert (reply.parsed, reply.parse_ok, reply.attempts) == (2, True, 2)
    assert reply.raw_replies == ["I think option two.", '{"answer": 2}']
    assert (totals.calls, totals.reasks, totals.parse_failures) == (2, 1, 0)


def test_the_reask_carries_the_previous_reply_and_the_parsers_complaint(tmp_path):
    script = Script("I think option two.", "still prose", '{"answer": 2}')
    with OpenAITestServer(reply=script) as server:
        reply, _ = ask(tmp_path / "c.sqlite", server, answer_of)
    assert reply.attempts == 3
    # attempt 0: exactly the caller's request, as before re-asks said anything
    assert script.bodies[0] == {
        "model": "m",
        "messages": [{"role": "user", "content": "Pick an option."}],
        "temperature": 0.0,
        "max_tokens": 512,
    }
    # json.loads("I think option two.") fails with "Expecting value: line 1 column 1 (char 0)"
    complaint = (
        "Your reply could not be used: Expecting value: line 1 column 1 (char 0). "
        "Reply again, in exactly the format asked for."
    )
    assert script.bodies[1]["messages"] == [
        {"role": "user", "content": "Pick an option."},
        {"role": "assistant", "content": "I think option two."},
        {"role": "user", "content": complaint},
    ]
    # the second re-ask shows only the latest reply, not the whole history of attempts
    assert script.bodies[2]["messages"] == [
        {"role": "user", "content": "Pick an option."},
        {"role": "assistant", "content": "still prose"},
        {"role": "user", "content": complaint},
    ]
    assert {k: v for k, v in script.bodies[2].items() if k != "messages"} == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 512,
    }


def test_the_reask_of_an_empty_reply_says_it_was_empty(tmp_path):
    script = Script("  ", "Paris")
    with OpenAITestServer(reply=script) as server:
        reply, _ = ask(tmp_path / "c.sqlite", server, None)
    assert (reply.parsed, reply.attempts) == ("Paris", 2)
    assert script.bodies[1]["messages"] == [
        {"role": "user", "content": "Pick an option."},
        {
            "role": "user",
            "content": "Your reply could not be used: it was empty. "
            "Reply again, in exactly the format asked for.",
        },
    ]


def test_a_reasks_cache_key_differs_from_the_first_asks():
    gateway = Gateway.from_config({"agent": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    request = ChatRequest("agent", "choose", QUESTION)
    reask = ChatRequest("agent", "choose", reask_messages(QUESTION, "prose", "not JSON"))
    keys = {gateway.request_key(request), gateway.request_key(reask, 1)}
    keys.add(gateway.request_key(ChatRequest("agent", "choose", QUESTION), 1))
    assert len(keys) == 3
    gateway.close()


def test_original_messages_strips_exactly_one_reask():
    system = [{"role": "system", "content": "Be brief."}, *QUESTION]
    assert original_messages(reask_messages(system, "prose", "not JSON.")) == system
    assert original_messages(reask_messages(system, "", "empty reply")) == system
    assert original_messages(system) == system
    # a conversation that merely ends in an assistant turn and a user turn is left alone
    dialogue = [*system, {"role": "assistant", "content": "2"}, {"role": "user", "content": "Why?"}]
    assert original_messages(dialogue) == dialogue
    long = reask_messages(QUESTION, "prose", "x" * 500 + "\n")
    assert long[-1]["content"] == (
        f"Your reply could not be used: {'x' * 200}. Reply again, in exactly the format asked for."
    )


def test_a_rerun_replays_the_attempts_from_the_cache_without_calls(tmp_path):
    script = Script("nonsense", '{"answer": 3}')
    with OpenAITestServer(reply=script) as server:
        ask(tmp_path / "c.sqlite", server, answer_of)
        again, totals = ask(tmp_path / "c.sqlite", server, answer_of)
        assert server.stats().total == 2  # the first run's two attempts, nothing more
    assert (again.parsed, again.cache_hit, totals.cache_hits) == (3, True, 2)


def test_still_unparseable_after_the_last_reask_is_counted_not_guessed(tmp_path):
    script = Script("no json here")
    with OpenAITestServer(reply=script) as server:
        reply, totals = ask(tmp_path / "c.sqlite", server, answer_of, max_parse_retries=1)
    assert (reply.parsed, reply.parse_ok, reply.attempts) == (None, False, 2)
    assert reply.raw_replies == ["no json here", "no json here"]
    assert len(script.bodies) == 2 and script.bodies[0] != script.bodies[1]
    assert (totals.calls, totals.reasks, totals.parse_failures) == (2, 1, 1)


def test_a_fixed_parser_accepts_a_cached_reply_without_a_new_call(tmp_path):
    script = Script("answer: 4")
    with OpenAITestServer(reply=script) as server:
        first, _ = ask(tmp_path / "c.sqlite", server, answer_of, max_parse_retries=0)
        fixed, _ = ask(tmp_path / "c.sqlite", server, lambda t: int(t.split(":")[1]))
        assert server.stats().total == 1
    assert (first.parse_ok, fixed.parse_ok, fixed.parsed) == (False, True, 4)


def test_an_empty_completion_is_a_failure_not_an_empty_answer(tmp_path):
    script = Script("", "   ", "Paris")
    with OpenAITestServer(reply=script) as server:
        reply, totals = ask(tmp_path / "c.sqlite", server, None)
    assert (reply.text, reply.parsed, reply.attempts, totals.reasks) == ("Paris", "Paris", 3, 2)


def test_require_text_rejects_blank_text():
    assert require_text("ok") == "ok"
    for blank in ("", " \n"):
        try:
            require_text(blank)
        except UnparseableReply:
            continue
        raise AssertionError(f"{blank!r} was accepted")


def test_reply_json_reads_json_or_raises_the_reask_message():
    assert reply_json('{"a": [1, 2]}') == {"a": [1, 2]}
    assert reply_json('{"a": "x\ty"}', strict=False) == {"a": "x\ty"}
    with pytest.raises(UnparseableReply, match=r"^not valid JSON: Invalid control character"):
        reply_json('{"a": "x\ty"}')
    with pytest.raises(UnparseableReply, match=r"^not valid JSON: Expecting value$"):
        reply_json("prose")
