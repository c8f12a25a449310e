"""Run-wide endpoint limits: resource names, budgets, job shares, one limit per endpoint."""

from __future__ import annotations

import asyncio
import time

import pytest

from mnemoflow.llm.addresses import redact
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.limits import endpoint_budgets, endpoint_resource, job_limits
from mnemoflow.llm.types import ChatRequest
from mnemoflow.testing.openai_server import OpenAITestServer

LOCAL = "http://127.0.0.1:8000/v1"
REMOTE = "https://api.example.org/v1/"
#: Resource names: host, port and the first 8 hex digits of sha256("/v1"), never the path itself.
LOCAL_NAME = "endpoint_127_0_0_1_8000_2d234c97"
REMOTE_NAME = "endpoint_api_example_org_443_2d234c97"
#: How params name LOCAL (the redacted form the job maps back to the real address).
LOCAL_PUBLIC = "http://127.0.0.1:8000/redacted-2d234c97"


def test_resource_names_are_identifiers_from_the_address():
    assert endpoint_resource(LOCAL) == LOCAL_NAME
    assert endpoint_resource(REMOTE) == REMOTE_NAME
    assert endpoint_resource("HTTPS://API.example.org/v1") == endpoint_resource(REMOTE)
    assert endpoint_resource("https://api.example.org:443/v1") == REMOTE_NAME
    # a token in the path never becomes part of a resource name
    assert "tok" not in endpoint_resource("https://api.example.org/tok_abc123/v1")


def test_budget_is_the_smallest_concurrency_bound_to_an_endpoint():
    models = {
        "agent": {"base_url": LOCAL, "model": "a", "concurrency": 12},
        "judge": {"base_url": LOCAL + "/", "model": "j", "concurrency": 6},
        "memory_writer": {"base_url": REMOTE, "model": "w"},  # default concurrency 8
        "user": {},  # offline: no endpoint, no resource
        "embedder": {"backend": "sentence_transformers"},
    }
    assert endpoint_budgets(models) == {
        LOCAL_NAME: 6,
        REMOTE_NAME: 8,
    }


def test_job_share_worked_example():
    """Budget 6, endpoint_jobs 4: share 6 // 4 = 1; rpm 120 x 1 / 6 = 20 per job.

    With at most 6 / 1 = 6 such jobs at once the run sends at most 6 x 20 = 120 per minute.
    """
    models = {
        "agent": {"base_url": LOCAL, "model": "a", "concurrency": 12, "requests_per_minute": 120},
        "judge": {"base_url": LOCAL, "model": "j", "concurrency": 6},
    }
    limits = job_limits(models, ["agent"], endpoint_jobs=4)
    assert limits.resources == {LOCAL_NAME: 1}
    assert limits.params == {
        LOCAL_PUBLIC: {
            "resource": LOCAL_NAME,
            "concurrency": 1,
            "requests_per_minute": 20.0,
        }
    }
    # Two jobs at a time: share 3, rpm 120 x 3 / 6 = 60.
    two = job_limits(models, ["agent", "judge"], endpoint_jobs=2)
    assert two.resources == {LOCAL_NAME: 3}
    shared = two.params[LOCAL_PUBLIC]
    assert shared["concurrency"] == 3 and shared["requests_per_minute"] == 60
    # A job whose roles are all offline declares nothing.
    assert job_limits(models, ["user", "memory_writer"]).resources == {}


def test_endpoint_jobs_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="config endpoint_jobs: a positive integer, got 0"):
        job_limits({}, ["agent"], endpoint_jobs=0)


def _burst(gateway: Gateway, n: int) -> None:
    async def main():
        try:
            await asyncio.gather(
                *(
                    gateway.chat(
                        ChatRequest(role, "t", [{"role": "user", "content": f"{role} {i}"}])
                    )
                    for i in range(n)
                    for role in ("agent", "judge")
                )
            )
        finally:
            await gateway.aclose()

    asyncio.run(main())


def test_roles_of_a_job_on_one_endpoint_share_its_share():
    """agent and judge each allow 8 in flight, but the job holds 2 of the endpoint: 2 at most."""
    with OpenAITestServer(latency=0.05) as server:
        binding = {"base_url": server.base_url, "model": "m", "concurrency": 8}
        models = {"agent": binding, "judge": binding}
        limits = job_limits(models, ["agent", "judge"], endpoint_jobs=4).params
        assert limits[redact(server.base_url)]["concurrency"] == 2
        _burst(Gateway.from_config(models, None, limits), 10)
        shared = server.stats()
        server.reset()
        _burst(Gateway.from_config(models, None), 10)  # without a share: each role its own 8
        alone = server.stats()
    assert (shared.total, shared.max_inflight) == (20, 2)
    assert (alone.total, alone.max_inflight) == (20, 16)


def test_a_jobs_rate_share_spaces_its_requests():
    """rpm 600 over budget 4 with share 1: 150 per minute, one request every 0.4 s."""
    with OpenAITestServer() as server:
        binding = {"base_url": server.base_url, "model": "m", "concurrency": 4}
        models = {"agent": {**binding, "requests_per_minute": 600}}
        limits = job_limits(models, ["agent"], endpoint_jobs=4).params
        assert limits[redact(server.base_url)]["requests_per_minute"] == 150
        gateway = Gateway.from_config(models, None, limits)

        async def main():
            try:
                for i in range(3):
                    await gateway.chat(
                        ChatRequest("agent", "t", [{"role": "user", "content": str(i)}])
                    )
            finally:
                await gateway.aclose()

        started = time.monotonic()
        asyncio.run(main())
        elapsed = time.monotonic() - started
    # Starts at 0, 0.4 and 0.8 s: three requests take at least 0.8 s.
    assert elapsed >= 0.8


def test_two_spellings_of_one_endpoint_share_one_limit_in_the_job():
    """``HTTPS://API.example.org/v1`` and ``https://api.example.org/v1`` are one resource, so the
    scheduler counts one share for both; the job must then hold one limit of that share for
    both roles, not one each (which would put twice the share in flight)."""
    models = {
        "agent": {"base_url": "HTTPS://API.example.org/v1", "model": "a", "concurrency": 8},
        "judge": {"base_url": REMOTE, "model": "j", "concurrency": 8},
    }
    limits = job_limits(models, ["agent", "judge"], endpoint_jobs=4)
    assert limits.resources == {REMOTE_NAME: 2}
    gateway = Gateway.from_config(models, limits=limits.params)
    agent, judge = gateway.backend("agent"), gateway.backend("judge")
    assert agent._shared is judge._shared and agent._shared.concurrency == 2


def test_a_role_that_falls_back_to_another_holds_a_share_of_its_endpoint():
    """An unbound ``critic`` calls the judge's endpoint (types.ROLE_DEFAULTS), so a job that
    calls the critic must hold a share of it, and run within that share."""
    models = {"judge": {"base_url": REMOTE, "model": "j", "concurrency": 8}}
    limits = job_limits(models, ["critic"], endpoint_jobs=4)
    assert limits.resources == {REMOTE_NAME: 2}
    gateway = Gateway.from_config(models, limits=limits.params)
    assert gateway.backend("critic")._shared.concurrency == 2
