"""The local OpenAI-compatible test server: replies, usage, fault plan, counters, CLI."""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from mnemoflow.llm.gateway import reask_messages
from mnemoflow.testing.openai_server import (
    GARBLED_TEXT,
    OpenAITestServer,
    fake_embedding,
    original_body,
    request_id,
)

REPO = Path(__file__).resolve().parents[1]


def post(url: str, body: dict, key: str | None = None, timeout: float = 5.0):
    """POST JSON; returns (status, headers, raw body) for 2xx and error statuses alike."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.headers, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def chat_body(text: str = "Where is my bike?", **extra) -> dict:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": text},
    ]
    return {"model": "m", "messages": messages, **extra}


def test_echo_reply_and_usage_worked_example():
    # prompt tokens = 3 + per message (4 + content tokens); content tokens = int(1.3 * words) + 1:
    # "You are terse." 3 words -> 4; "Where is my bike?" 4 words -> 6; 3 + (4+4) + (4+6) = 21.
    # reply "echo: Where is my bike?" 5 words -> int(6.5) + 1 = 7.
    with OpenAITestServer() as server:
        status, _, raw = post(f"{server.base_url}/chat/completions", chat_body())
    reply = json.loads(raw)
    assert status == 200
    assert reply["object"] == "chat.completion"
    assert reply["model"] == "m"
    assert reply["choices"][0]["message"] == {
        "role": "assistant",
        "content": "echo: Where is my bike?",
    }
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"] == {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}


def test_fixed_and_function_replies_and_max_tokens():
    with OpenAITestServer(reply="one two three four") as server:
        _, _, raw = post(f"{server.base_url}/chat/completions", chat_body(max_tokens=2))
    choice = json.loads(raw)["choices"][0]
    assert choice["message"]["content"] == "one two"
    assert choice["finish_reason"] == "length"

    def answer(body: dict) -> str:
        return f"seed={body.get('seed')} temperature={body.get('temperature')}"

    with OpenAITestServer(reply=answer) as server:
        _, _, raw = post(f"{server.base_url}/chat/completions", chat_body(seed=7, temperature=0.5))
    assert json.loads(raw)["choices"][0]["message"]["content"] == "seed=7 temperature=0.5"


def test_fault_plan_applies_per_distinct_request_and_counts():
    with OpenAITestServer(faults=["500", "429"], retry_after=2) as server:
        url = f"{server.base_url}/chat/completions"
        first, second = chat_body("first"), chat_body("second")
        statuses = [post(url, first)[0], post(url, second)[0]]
        status, headers, _ = post(url, first)
        statuses.append(status)
        assert headers["Retry-After"] == "2"
        statuses += [post(url, first)[0], post(url, first)[0]]
        stats = server.stats()
    # first: 500, 429, 200, 200 (past the plan); second: 500
    assert statuses == [500, 500, 429, 200, 200]
    assert stats.attempts == {request_id(first): 4, request_id(second): 1}
    assert stats.answered == {request_id(first): 2}
    assert stats.faults == {"500": 2, "429": 1}
    assert stats.total == 5 and stats.inflight == 0


def test_a_gateway_reask_is_the_next_attempt_of_the_body_it_reasks():
    # ["garbled"]: garble the first reply, answer the re-ask (whose body differs: it carries the
    # garbled reply and a follow-up); the echo answers the original prompt, not the follow-up.
    with OpenAITestServer(faults=["garbled"]) as server:
        url = f"{server.base_url}/chat/completions"
        first = chat_body("Where is my bike?")
        reask = {**first, "messages": reask_messages(first["messages"], GARBLED_TEXT, "no verdict")}
        replies = [json.loads(post(url, body)[2]) for body in (first, reask)]
        stats = server.stats()
    texts = [reply["choices"][0]["message"]["content"] for reply in replies]
    assert texts == [GARBLED_TEXT, "echo: Where is my bike?"]
    assert original_body(reask) == first and original_body(first) is first
    assert stats.attempts == {request_id(first): 2} and stats.faults == {"garbled": 1}


def test_retry_after_as_http_date():
    with OpenAITestServer(faults=["503"], retry_after=3, retry_after_date=True) as server:
        before = time.time()
        status, headers, _ = post(f"{server.base_url}/chat/completions", chat_body())
    assert status == 503
    when = email.utils.parsedate_to_datetime(headers["Retry-After"]).timestamp()
    assert before + 3 <= when <= before + 5


@pytest.mark.parametrize(
    "kind, content_type",
    [("malformed", "application/json"), ("html", "text/html"), ("502", "text/html")],
)
def test_malformed_and_non_json_bodies(kind, content_type):
    with OpenAITestServer(faults=[kind]) as server:
        status, headers, raw = post(f"{server.base_url}/chat/completions", chat_body())
    assert headers["Content-Type"].startswith(content_type)
    assert status == (502 if kind == "502" else 200)
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_disconnect_fault_closes_the_connection():
    with OpenAITestServer(faults=["disconnect"]) as server:
        url = f"{server.base_url}/chat/completions"
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            post(url, chat_body())
        assert post(url, chat_body())[0] == 200
        stats = server.stats()
    assert stats.faults == {"disconnect": 1} and stats.inflight == 0


def test_null_content_and_nochoices():
    with OpenAITestServer(faults=["null_content"]) as server:
        _, _, raw = post(f"{server.base_url}/chat/completions", chat_body())
    assert json.loads(raw)["choices"][0]["message"]["content"] is None
    with OpenAITestServer(faults=["nochoices"]) as server:
        _, _, raw = post(f"{server.base_url}/chat/completions", chat_body())
    assert "choices" not in json.loads(raw)


def test_timeout_fault_sleeps_past_the_client_and_is_cancelled():
    with OpenAITestServer(faults=["timeout"], hang=5.0) as server:
        started = time.perf_counter()
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(f"{server.base_url}/chat/completions", chat_body(), timeout=0.2)
        assert time.perf_counter() - started < 2.0  # the server would hang for 5 s
        deadline = time.monotonic() + 2.0
        while server.stats().inflight and time.monotonic() < deadline:
            time.sleep(0.02)  # the hung-up request is cancelled, not left sleeping
        stats = server.stats()
        assert stats.inflight == 0
        assert stats.faults == {"timeout": 1}
        assert stats.answered == {}
        status, _, _ = post(f"{server.base_url}/chat/completions", chat_body())  # attempt 2
        assert status == 200


def test_max_inflight_counter_and_latency():
    with OpenAITestServer(latency=0.2) as server:
        url = f"{server.base_url}/chat/completions"
        threads = [threading.Thread(target=post, args=(url, chat_body(f"q{i}"))) for i in range(5)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        stats = server.stats()
    assert stats.max_inflight == 5
    assert len(stats.answered) == 5
    assert 0.2 <= elapsed < 0.9  # concurrent: one at a time would take 1 s


def test_embeddings_models_and_base64():
    with OpenAITestServer(embed_dim=8, model="tiny-embed") as server:
        url = f"{server.base_url}/embeddings"
        _, _, raw = post(url, {"model": "e", "input": ["alpha", "beta"]})
        _, _, raw64 = post(url, {"model": "e", "input": "alpha", "encoding_format": "base64"})
        with urllib.request.urlopen(f"{server.base_url}/models") as reply:
            models = json.load(reply)
    data = json.loads(raw)["data"]
    assert [item["index"] for item in data] == [0, 1]
    alpha = np.asarray(data[0]["embedding"], dtype=np.float32)
    assert alpha.shape == (8,)
    assert np.allclose(alpha, fake_embedding("alpha", 8))
    assert np.isclose(np.linalg.norm(alpha), 1.0)
    decoded = np.frombuffer(base64.b64decode(json.loads(raw64)["data"][0]["embedding"]), "<f4")
    assert np.allclose(decoded, alpha)
    assert [m["id"] for m in models["data"]] == ["tiny-embed"]


def test_api_key_required_when_configured():
    with OpenAITestServer(api_key="sk-right") as server:
        url = f"{server.base_url}/chat/completions"
        assert post(url, chat_body())[0] == 401
        assert post(url, chat_body(), key="sk-wrong")[0] == 401
        assert post(url, chat_body(), key="sk-right")[0] == 200


def test_bad_requests_are_400():
    with OpenAITestServer() as server:
        url = f"{server.base_url}/chat/completions"
        assert post(url, {"model": "m", "messages": []})[0] == 400
        assert post(url, {"messages": [{"role": "user", "content": "x"}]})[0] == 400
        assert post(f"{server.base_url}/embeddings", {"model": "e", "input": [1, 2]})[0] == 400


def test_latency_jitter_is_bounded_and_deterministic():
    server = OpenAITestServer(latency=0.05, jitter=0.2)
    draws = [server._latency(f"r{i}", 0) for i in range(200)]
    assert all(0.04 <= d <= 0.06 for d in draws)
    assert abs(sum(draws) / len(draws) - 0.05) < 0.002  # same mean
    assert draws == [server._latency(f"r{i}", 0) for i in range(200)]
    assert OpenAITestServer(latency=0.05)._latency("r0", 0) == 0.05
    with pytest.raises(ValueError, match="jitter"):
        OpenAITestServer(jitter=1.5)


def test_only_loopback_and_known_faults():
    with pytest.raises(ValueError, match="loopback"):
        OpenAITestServer(host="0.0.0.0")
    with pytest.raises(ValueError, match="unknown fault kinds"):
        OpenAITestServer(faults=["418"])


def test_in_loop_start_and_stop():
    import asyncio

    async def main() -> int:
        server = await OpenAITestServer().astart()
        try:
            loop = asyncio.get_running_loop()
            status, _, _ = await loop.run_in_executor(
                None, post, f"{server.base_url}/chat/completions", chat_body()
            )
            return status
        finally:
            await server.astop()

    assert asyncio.run(main()) == 200


def test_command_line_server():
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemoflow.testing.openai_server", "--latency", "0.01"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("serving http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.split()[1]
        root = base_url.removesuffix("/v1")
        assert post(f"{base_url}/chat/completions", chat_body())[0] == 200
        with urllib.request.urlopen(f"{root}/mnemoflow/stats") as reply:
            assert json.load(reply)["total"] == 1
        post(f"{root}/mnemoflow/reset", {})
        with urllib.request.urlopen(f"{root}/mnemoflow/stats") as reply:
            assert json.load(reply)["total"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_fixed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with OpenAITestServer(port=port) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"


def test_fault_rates_are_checked_and_seeded_by_request():
    with pytest.raises(ValueError, match="sum to <= 1"):
        OpenAITestServer(fault_rates={"500": 0.7, "429": 0.4})
    with pytest.raises(ValueError, match="unknown fault kinds"):
        OpenAITestServer(fault_rates={"teapot": 0.1})
    server = OpenAITestServer(fault_rates={"500": 0.5, "garbled": 0.5})
    draws = [server._fault("body-1", attempt) for attempt in range(40)]
    assert set(draws) == {"500", "garbled"}  # rates summing to 1 leave no clean attempt
    assert draws == [server._fault("body-1", attempt) for attempt in range(40)]  # seeded
