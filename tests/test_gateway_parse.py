"""Re-asked parse failures: an unparseable or empty reply is never final, and never a guess."""

from __future__ import annotations

import asyncio
import json

from mnemoflow.llm.gateway import Gateway, require_text
from mnemoflow.llm.types import ChatRequest, UnparseableReply
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
    """Replies in turn from a list (the last one repeats)."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.calls = 0

    def __call__(self, body):
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return reply


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
