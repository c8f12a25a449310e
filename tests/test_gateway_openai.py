"""The gateway's network half: the openai backend against the local test server.

Every test counts on the server side too: a request is "answered exactly once" when the server
sent exactly one well-formed reply for that body, whatever faults came before it.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.openai_backend import OpenAIBackend, parse_retry_after
from mnemoflow.llm.types import ChatRequest, EndpointError, EndpointSpec
from mnemoflow.testing.openai_server import OpenAITestServer, fake_embedding

KEY_ENV = "MNEMOFLOW_TEST_GATEWAY_KEY"
FAKE_KEY = "sk-mnemoflow-FAKE-7d3e1c9a5b42"


@pytest.fixture(autouse=True)
def _fast_backoff_and_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    monkeypatch.setattr(OpenAIBackend, "backoff_base", 0.01)


def make_gateway(server: OpenAITestServer, cache=None, **endpoint) -> Gateway:
    binding = {
        "base_url": server.base_url,
        "model": "test-model",
        "api_key_env": KEY_ENV,
        "concurrency": 4,
        "timeout": 2.0,
        "max_retries": 4,
        **endpoint,
    }
    return Gateway.from_config({"agent": binding}, cache)


def ask(i: int | str, seed: int | None = None) -> ChatRequest:
    return ChatRequest("agent", "answer", [{"role": "user", "content": f"question {i}"}], seed=seed)


def run(gateway: Gateway, requests: list[ChatRequest]):
    async def main():
        try:
            return await asyncio.gather(*(gateway.chat(r) for r in requests))
        finally:
            await gateway.aclose()

    return asyncio.run(main())


def timed_run(gateway: Gateway, requests: list[ChatRequest]):
    """:func:`run`, and the seconds it took."""
    started = time.perf_counter()
    replies = run(gateway, requests)
    return replies, time.perf_counter() - started


def test_concurrency_limit_respected():
    with OpenAITestServer(latency=0.05) as server:
        gateway = make_gateway(server, concurrency=4)
        replies, elapsed = timed_run(gateway, [ask(i) for i in range(40)])
        stats = server.stats()
    assert [r.text for r in replies] == [f"echo: question {i}" for i in range(40)]
    assert stats.max_inflight == 4  # the limit was reached and never exceeded
    assert len(stats.answered) == 40 and set(stats.answered.values()) == {1}
    assert elapsed < 1.5  # ideal 0.5 s; one at a time would take 2 s


@pytest.mark.parametrize(
    "plan",
    [
        ["500", "502", "503"],
        ["429", "429"],
        ["timeout"],
        ["malformed", "html", "nochoices"],
        ["disconnect", "503"],
    ],
)
def test_retries_recover_without_lost_or_duplicated_calls(plan):
    with OpenAITestServer(faults=plan, retry_after=0.05, hang=3.0) as server:
        gateway = make_gateway(server, timeout=0.3, concurrency=4)
        replies = run(gateway, [ask(i) for i in range(12)])
        stats = server.stats()
    # each reply belongs to its own request (nothing crossed, nothing lost)
    assert [r.text for r in replies] == [f"echo: question {i}" for i in range(12)]
    assert not any(r.cache_hit for r in replies)
    # the server answered each distinct request exactly once, after len(plan) faults
    assert len(stats.answered) == 12 and set(stats.answered.values()) == {1}
    assert set(stats.attempts.values()) == {len(plan) + 1}
    assert stats.total == 12 * (len(plan) + 1)
    totals = gateway.ledger.totals()
    assert (totals.calls, totals.retries, totals.errors) == (12, 12 * len(plan), 0)


def test_retry_after_seconds_honoured_instead_of_backoff(monkeypatch):
    # With a 5 s backoff base, a client that ignored Retry-After would wait 2.5-5 s.
    monkeypatch.setattr(OpenAIBackend, "backoff_base", 5.0)
    with OpenAITestServer(faults=["429"], retry_after=0.4) as server:
        gateway = make_gateway(server)
        (reply,), elapsed = timed_run(gateway, [ask(1)])
    assert reply.text == "echo: question 1"
    assert 0.4 <= elapsed < 1.5
    assert gateway.ledger.totals().retries == 1


def test_retry_after_http_date_honoured():
    # The date has one-second resolution and the server rounds up: wait between 1 and 2 s.
    with OpenAITestServer(faults=["503"], retry_after=1, retry_after_date=True) as server:
        gateway = make_gateway(server)
        (reply,), elapsed = timed_run(gateway, [ask(1)])
    assert reply.text == "echo: question 1"
    assert 0.95 <= elapsed < 2.8


def test_parse_retry_after_forms():
    import email.utils

    import httpx2

    assert parse_retry_after(httpx2.Headers({"retry-after": "7"})) == 7.0
    assert parse_retry_after(httpx2.Headers({"retry-after-ms": "250"})) == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after(httpx2.Headers({"retry-after": date})) <= 31
    assert parse_retry_after(httpx2.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx2.Headers({})) is None


def test_backoff_grows_exponentially_with_jitter():
    backend = OpenAIBackend.__new__(OpenAIBackend)  # delay() needs no client
    backend.backoff_base, backend.backoff_cap = 1.0, 6.0
    for failures, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 6.0), (9, 6.0)]:
        delays = [backend.delay(failures, None) for _ in range(50)]
        assert all(ceiling * 0.5 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered
    assert backend.delay(3, 0.25) == 0.25  # Retry-After wins


def test_retries_exhausted_is_one_line_error_and_counted():
    with OpenAITestServer(faults=["500"] * 5) as server:
        gateway = make_gateway(server, max_retries=2)
        with pytest.raises(EndpointError) as failure:
            run(gateway, [ask(1)])
        stats = server.stats()
    message = str(failure.value)
    assert "\n" not in message
    assert "models.agent" in message and "gave up after 3 attempts" in message
    assert "HTTP 500" in message
    assert stats.total == 3 and not stats.answered
    totals = gateway.ledger.totals()
    assert (totals.calls, totals.errors) == (0, 1)


def test_other_4xx_fails_at_once():
    with OpenAITestServer(faults=["400"]) as server:
        gateway = make_gateway(server)
        with pytest.raises(EndpointError, match=r"models\.agent .*HTTP 400: injected fault 400"):
            run(gateway, [ask(1)])
        assert server.stats().total == 1


def test_wrong_key_fails_at_once_without_showing_the_key():
    with OpenAITestServer(api_key="sk-the-right-one") as server:
        gateway = make_gateway(server)
        with pytest.raises(EndpointError, match="HTTP 401") as failure:
            run(gateway, [ask(1)])
        assert server.stats().total == 1
    assert FAKE_KEY not in str(failure.value)


def test_null_content_is_a_failure_that_is_asked_again_not_an_empty_answer():
    with OpenAITestServer(faults=["null_content"]) as server:
        gateway = make_gateway(server)
        (reply,) = run(gateway, [ask(1)])
        assert server.stats().total == 2  # the null reply, then the re-ask
    assert (reply.text, reply.attempts, reply.raw_replies) == (
        "echo: question 1",
        2,
        ["", "echo: question 1"],
    )
    entry = gateway.ledger.entries["agent/answer"]
    assert (entry.calls, entry.reasks, entry.parse_failures, entry.retries) == (2, 1, 0, 0)


def test_sampling_parameters_and_seed_reach_the_endpoint():
    def show(body: dict) -> str:
        return json.dumps({k: body.get(k) for k in ("temperature", "max_tokens", "top_p", "seed")})

    with OpenAITestServer(reply=show) as server:
        gateway = make_gateway(server, temperature=0.7, max_tokens=64, top_p=0.9, seed=11)
        default, override = run(gateway, [ask(1), ask(1, seed=5)])
        plain = make_gateway(server)
        (unset,) = run(plain, [ask(2)])
    assert json.loads(default.text) == {
        "temperature": 0.7,
        "max_tokens": 64,
        "top_p": 0.9,
        "seed": 11,
    }
    assert json.loads(override.text)["seed"] == 5  # the request's seed overrides the endpoint's
    assert json.loads(unset.text) == {
        "temperature": 0.0,
        "max_tokens": 512,
        "top_p": None,
        "seed": None,
    }


def test_usage_tokens_and_model_reach_the_ledger():
    # "question 1" as the only message: 3 + 4 + (int(2 * 1.3) + 1 = 3) = 10 prompt tokens;
    # "echo: question 1" -> 3 words -> int(3.9) + 1 = 4 completion tokens.
    with OpenAITestServer() as server:
        gateway = make_gateway(server)
        (reply,) = run(gateway, [ask(1)])
    assert (reply.tokens_in, reply.tokens_out, reply.model) == (10, 4, "test-model")
    entry = gateway.ledger.entries["agent/answer"]
    assert (entry.calls, entry.cache_hits, entry.tokens_in, entry.tokens_out) == (1, 0, 10, 4)
    assert gateway.ledger.models["agent"] == "test-model"


def test_unset_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    spec = EndpointSpec(
        role="judge",
        backend="openai",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key_env=KEY_ENV,
    )
    with pytest.raises(ConfigError) as failure:
        OpenAIBackend(spec)
    assert str(failure.value) == (
        f"environment variable {KEY_ENV} (named by models.judge.api_key_env) is not set"
    )
    with OpenAITestServer() as server:
        gateway = make_gateway(server)
        with pytest.raises(ConfigError, match=f"{KEY_ENV} .*models.agent.api_key_env"):
            run(gateway, [ask(1)])
        assert server.stats().total == 0


@pytest.mark.parametrize(
    "key, value", [("timeout", 0), ("requests_per_minute", -5), ("concurrency", 0)]
)
def test_nonpositive_limits_are_config_errors(key, value):
    spec = EndpointSpec(
        role="agent", backend="openai", model="m", base_url="http://127.0.0.1:9/v1", **{key: value}
    )
    with pytest.raises(ConfigError, match=rf"config models\.agent\.{key}: must be > 0"):
        OpenAIBackend(spec)


def test_no_key_variable_uses_a_placeholder_for_local_servers():
    with OpenAITestServer(api_key="EMPTY") as server:
        gateway = make_gateway(server, api_key_env=None)
        (reply,) = run(gateway, [ask(1)])
    assert reply.text == "echo: question 1"


def test_requests_per_minute_spaces_requests():
    with OpenAITestServer() as server:
        gateway = make_gateway(server, requests_per_minute=600, concurrency=8)  # one per 0.1 s
        _, elapsed = timed_run(gateway, [ask(i) for i in range(5)])
    assert 0.4 <= elapsed < 2.0


def test_embeddings_in_batches_and_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(OpenAIBackend, "embed_batch", 3)
    texts = [f"text {i}" for i in range(7)]
    with OpenAITestServer(embed_dim=16, faults=["500"]) as server:
        binding = {
            "base_url": server.base_url,
            "model": "embed-model",
            "api_key_env": KEY_ENV,
        }
        gateway = Gateway.from_config({"embedder": binding}, tmp_path / "cache.sqlite")

        async def main():
            first = await gateway.embed(texts)
            again = await gateway.embed(texts[2:] + ["text 7"])
            await gateway.aclose()
            return first, again

        first, again = asyncio.run(main())
        stats = server.stats()
    assert first.shape == (7, 16) and first.dtype == np.float32
    for row, text in zip(first, texts, strict=True):
        assert np.allclose(row, fake_embedding(text, 16))
    assert np.allclose(again[:5], first[2:])
    # 3 batches for 7 texts (each failing once first), then 1 batch for the one new text
    assert stats.paths["embeddings"] == 2 * 3 + 2
    assert len(stats.answered) == 4
    entry = gateway.ledger.entries["embedder/embed"]
    assert (entry.calls, entry.cache_hits) == (13, 5)


def test_gateway_survives_successive_event_loops():
    with OpenAITestServer() as server:
        gateway = make_gateway(server)
        first = asyncio.run(gateway.chat(ask(1)))
        second = asyncio.run(gateway.chat(ask(2)))  # new loop: client and slots rebuilt
        asyncio.run(gateway.aclose())
    assert (first.text, second.text) == ("echo: question 1", "echo: question 2")


def test_identical_concurrent_requests_share_one_call_and_survive_cancellation():
    with OpenAITestServer(latency=0.3) as server:
        gateway = make_gateway(server)

        async def main():
            owner = asyncio.create_task(gateway.chat(ask(1)))
            await asyncio.sleep(0.05)
            waiter = asyncio.create_task(gateway.chat(ask(1)))
            await asyncio.sleep(0.05)
            owner.cancel()  # the waiter must take the call over, not inherit the cancellation
            reply = await waiter
            await gateway.aclose()
            return owner, reply

        owner, reply = asyncio.run(main())
        assert server.stats().total == 2  # the owner's call was abandoned, the waiter's answered
    assert owner.cancelled()
    assert reply.text == "echo: question 1"
    assert gateway.ledger.totals().errors == 0

    with OpenAITestServer(latency=0.1) as server:
        gateway = make_gateway(server)
        replies = run(gateway, [ask(1), ask(1), ask(1)])
        assert server.stats().total == 1
    assert [r.cache_hit for r in replies] == [False, True, True]


def test_key_never_in_cache_ledger_or_description(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with OpenAITestServer(api_key=FAKE_KEY) as server:
        gateway = make_gateway(server, cache=cache)
        run(gateway, [ask(i) for i in range(5)])
        key = FAKE_KEY.encode()
        open_files = sorted(p for p in tmp_path.rglob("*") if p.is_file())  # shards still open
        assert [p.suffix for p in open_files] == [".data", ".index"]
        assert b"echo: question 1" in open_files[0].read_bytes()  # the replies are in there
        assert all(key not in p.read_bytes() for p in open_files)
        spec = gateway.specs["agent"]
        description = json.dumps(gateway.describe())
        ledger = gateway.ledger.to_json({"roles": gateway.describe()})
        backend_repr = repr(OpenAIBackend(spec))
        gateway.close()
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 2 and all(key not in path.read_bytes() for path in files)
    assert FAKE_KEY not in ledger and KEY_ENV not in ledger
    assert FAKE_KEY not in description and KEY_ENV not in description
    assert FAKE_KEY not in backend_repr and FAKE_KEY not in repr(spec)


class EchoingProxy(OpenAITestServer):
    """A proxy that answers 200 with an HTML page quoting the request's Authorization header
    (some do, on a misrouted request), the key ``pad`` characters into the body."""

    def __init__(self, pad: int, **kwargs):
        super().__init__(faults=["html"] * 10, **kwargs)
        self.pad = pad

    def _fault_response(self, kind, request):
        from aiohttp import web

        text = "<html>" + "x" * self.pad + f" refused: {request.headers['Authorization']}</html>"
        return web.Response(status=200, text=text, content_type="text/html")


@pytest.mark.parametrize("pad", [10, 45, 2000], ids=["early", "at-the-cut", "deep"])
def test_a_malformed_reply_quoting_the_key_never_shows_it(pad):
    """The body of a malformed 200 reaches the error message: the key, or any 8 characters of
    it, must not (it was once truncated first and not scrubbed at all)."""
    with EchoingProxy(pad) as server:
        gateway = make_gateway(server, max_retries=1)
        with pytest.raises(EndpointError, match="malformed reply") as failure:
            run(gateway, [ask(1)])
    message = str(failure.value)
    assert "\n" not in message and len(message) < 600
    fragments = {FAKE_KEY[i : i + 8] for i in range(len(FAKE_KEY) - 7)}
    assert [f for f in fragments if f in message] == []


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("max_retries", -1, "a non-negative integer, got -1"),
        ("max_parse_retries", 1.5, "a non-negative integer, got 1.5"),
        ("concurrency", 0, "a positive integer, got 0"),
        ("max_tokens", True, "a positive integer, got True"),
    ],
)
def test_integer_settings_name_the_range_they_accept(key, value, expected):
    """``max_retries: 0`` is valid, so its error must not ask for a positive integer."""
    with pytest.raises(ConfigError, match=rf"^config models\.judge\.{key}: {expected}$"):
        EndpointSpec.from_config("judge", {key: value})
    assert EndpointSpec.from_config("judge", {"max_retries": 0}).max_retries == 0


@pytest.mark.parametrize(
    "base_url",
    [
        "https://user:sk-secret@proxy.example/v1",
        "https://sk-secret@proxy.example/v1",
        "https://proxy.example/v1?api-key=sk-secret",
        "https://proxy.example/v1?key=sk-secret&x=1",
    ],
)
def test_a_key_written_into_base_url_is_refused(base_url):
    """base_url is recorded in every ledger and error message: a key in it would be too."""
    with pytest.raises(ConfigError) as failure:
        EndpointSpec.from_config("judge", {"base_url": base_url, "model": "m"})
    message = str(failure.value)
    assert message.startswith("config models.judge.base_url: ")
    assert "api_key_env" in message and "sk-secret" not in message


def test_a_plain_base_url_with_a_query_is_accepted():
    url = "https://proxy.example/v1?api-version=2024-06-01"
    assert EndpointSpec.from_config("judge", {"base_url": url, "model": "m"}).base_url == url
