"""No credential in a base_url, no URL path in a written file (mnemoflow.llm.addresses).

A base_url with user info or a query parameter other than api-version is refused in one line that
says how to pass the secret instead; every address that params, resource names, ledgers, logs or
the report hold is redacted to scheme://host:port plus a hash of its path; a job finds the real
address in the config; headers_env / base_url_env / api_key_env are read only by the backend.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.jobs.context import JobEnv
from mnemoflow.llm.addresses import (
    public_bindings,
    real_addresses,
    redact,
    redacted_config,
    refuse_credentials,
)
from mnemoflow.llm.endpoints import bind_endpoints, check_endpoints
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import ChatRequest, EndpointError, EndpointSpec, check_bindings
from mnemoflow.testing.openai_server import OpenAITestServer

TOKEN = "tok_abc123secret"
WHERE = "config models.agent.base_url"


@pytest.mark.parametrize(
    "url",
    [
        f"https://gw.example/v1?sig={TOKEN}",
        f"https://gw.example/v1?{TOKEN}",
        f"https://gw.example/v1?api-version=2024-06-01&sig={TOKEN}",
        f"https://user:{TOKEN}@gw.example/v1",
        f"https://{TOKEN}@gw.example/v1",
    ],
)
def test_a_base_url_holding_a_credential_is_refused_in_one_line_without_it(url):
    with pytest.raises(ConfigError) as caught:
        refuse_credentials(url, WHERE)
    message = str(caught.value)
    assert message.startswith(f"{WHERE}: holds ") and "\n" not in message
    assert "api_key_env" in message and "headers_env" in message and "base_url_env" in message
    assert TOKEN not in message


def test_azure_api_version_and_a_plain_url_are_accepted():
    refuse_credentials("https://x.openai.azure.com/openai/v1?api-version=2024-06-01", WHERE)
    refuse_credentials("http://127.0.0.1:8000/v1", WHERE)


def test_the_refusal_names_the_role_or_the_endpoint():
    with pytest.raises(ConfigError, match=r"^config models\.judge\.base_url: holds a query"):
        EndpointSpec.from_config("judge", {"base_url": "https://h/v1?key=1", "model": "m"})
    with pytest.raises(ConfigError, match=r"^config endpoints\.gw\.base_url: holds user info"):
        check_endpoints({"gw": {"base_url": "https://u:p@h/v1"}})
    # checked before the URL's syntax, whose message quotes the URL
    with pytest.raises(ConfigError, match="holds user info") as caught:
        EndpointSpec.from_config("judge", {"base_url": f"ftp://u:{TOKEN}@h/v1", "model": "m"})
    assert TOKEN not in str(caught.value)


def test_redact_worked_example():
    """Host lower-cased, the scheme's default port written, the path (with its token) hashed."""
    url = f"https://GW.example/{TOKEN}/v1/"
    digest = hashlib.sha256(f"/{TOKEN}/v1".encode()).hexdigest()[:8]
    assert redact(url) == f"https://gw.example:443/redacted-{digest}"
    assert redact("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/redacted-2d234c97"
    assert redact("https://h.example") == "https://h.example:443"  # no path, no hash
    # idempotent, and symbolic addresses are kept
    for address in (url, "https://h.example", "endpoint://q", "env://GW_URL", "not a url"):
        assert redact(redact(address)) == redact(address)
    assert redact("endpoint://q") == "endpoint://q" and redact("env://GW_URL") == "env://GW_URL"
    # two paths, two hashes: one endpoint's limits never merge with another's
    assert redact("https://h/a/v1") != redact("https://h/b/v1")
    assert TOKEN not in redact(f"ftp://{TOKEN}@h/x") and TOKEN not in redact(f"{TOKEN} x")


def test_bindings_and_the_report_config_hold_only_redacted_addresses():
    config = {
        "models": {"agent": {"base_url": f"https://h/{TOKEN}/v1", "model": "m"}, "user": {}},
        "endpoints": {"gw": {"base_url": f"https://h/{TOKEN}/v2"}},
        "cache": "cache",
    }
    shown = redacted_config(config)
    assert TOKEN not in repr(shown) and shown["cache"] == "cache"
    assert shown["models"]["agent"]["model"] == "m" and shown["models"]["user"] == {}
    assert TOKEN in repr(config)  # the config itself is left as written
    public = public_bindings(bind_endpoints(config["models"], config["endpoints"]))
    assert public["agent"]["base_url"] == redact(f"https://h/{TOKEN}/v1")


def test_base_url_env_is_a_symbolic_address_in_both_schemas():
    spec = EndpointSpec.from_config("agent", {"base_url_env": "GW_URL", "model": "m"})
    assert (spec.backend, spec.base_url, spec.base_url_env) == ("openai", "env://GW_URL", "GW_URL")
    assert spec.public()["base_url"] == "env://GW_URL" and "base_url_env" not in spec.public()
    with pytest.raises(ConfigError, match=r"models\.agent: both base_url and base_url_env"):
        EndpointSpec.from_config("agent", {"base_url_env": "X", "base_url": "http://h/v1"})
    with pytest.raises(ConfigError, match=r"endpoints\.gw: both base_url and base_url_env"):
        check_endpoints({"gw": {"base_url_env": "X", "base_url": "http://h/v1"}})
    with pytest.raises(ConfigError, match=r"models\.agent\.base_url_env: the NAME of an env"):
        EndpointSpec.from_config("agent", {"base_url_env": "http://h/v1", "model": "m"})
    endpoints = {"gw": {"base_url_env": "GW_URL", "headers_env": {"X-Sig": "GW_SIG"}}}
    bound = bind_endpoints({"judge": {"endpoint": "gw", "model": "m"}}, endpoints)
    judge = EndpointSpec.from_config("judge", bound["judge"])
    assert judge.base_url == "env://GW_URL" and judge.headers_env == {"X-Sig": "GW_SIG"}
    with pytest.raises(ConfigError, match=r"models\.judge: both endpoint and headers_env"):
        bind_endpoints({"judge": {"endpoint": "gw", "headers_env": {"A": "B"}}}, endpoints)


def test_headers_env_is_checked_and_its_variables_required_at_startup():
    where = r"config models\.agent\.headers_env"
    for bad, message in [
        ({"X Sig": "V"}, "is not an HTTP header name"),
        ({"X-Sig": "not a name"}, "the NAME of an environment variable"),
        ("X-Sig", "a mapping of header name"),
    ]:
        with pytest.raises(ConfigError, match=f"{where}.*{message}"):
            EndpointSpec.from_config("agent", {"base_url": "http://h/v1", "model": "m",
                                               "headers_env": bad})  # fmt: skip
    with pytest.raises(ConfigError, match=r"models\.embedder\.headers_env: only the openai"):
        local = {"backend": "sentence_transformers", "headers_env": {"A": "B"}}
        EndpointSpec.from_config("embedder", local)
    with pytest.raises(ConfigError, match=r"models\.agent: backend offline .* headers_env is"):
        EndpointSpec.from_config("agent", {"backend": "offline", "headers_env": {"A": "B"}})
    models = {"agent": {"base_url_env": "GW_URL", "model": "m", "headers_env": {"X-Sig": "S"}}}
    with pytest.raises(ConfigError, match=r"models\.agent\.base_url_env: environment variable"):
        check_bindings(models, {}, used=["agent"])
    with pytest.raises(ConfigError, match=r"models\.agent\.headers_env\.X-Sig: environment var"):
        check_bindings(models, {"GW_URL": "http://h/v1"}, used=["agent"])
    check_bindings(models, {"GW_URL": "http://h/v1", "S": "v"}, used=["agent"])
    check_bindings(models, {}, used=["agent"], require_keys=False)  # mnemoflow plan


def _ask(gateway: Gateway, role: str = "agent") -> str:
    async def main():
        try:
            return (
                await gateway.chat(ChatRequest(role, "t", [{"role": "user", "content": "hi"}]))
            ).text
        finally:
            await gateway.aclose()

    return asyncio.run(main())


def test_the_backend_reads_url_and_headers_from_the_environment(monkeypatch):
    """The server answers only under its token path and with the header: both come from env."""
    with OpenAITestServer(reply="ok", prefixes=[TOKEN], headers={"X-Sig": "sig-value"}) as server:
        url = server.base_url.replace("/v1", f"/{TOKEN}/v1")
        monkeypatch.setenv("GW_URL", url)
        monkeypatch.setenv("GW_SIG", "sig-value")
        models = {
            "agent": {"base_url_env": "GW_URL", "model": "m", "headers_env": {"X-Sig": "GW_SIG"}}
        }
        gateway = Gateway.from_config(models)
        assert _ask(gateway) == "ok"
        assert TOKEN not in repr(gateway.describe()) and TOKEN not in gateway.ledger.to_json({})
        monkeypatch.setenv("GW_SIG", "wrong")
        with pytest.raises(EndpointError, match="HTTP 401") as caught:
            _ask(Gateway.from_config({"agent": {**models["agent"], "max_retries": 0}}))
        assert TOKEN not in str(caught.value) and "wrong" not in str(caught.value)
        assert server.stats().paths


def test_an_error_message_never_shows_the_url_path_or_a_header(monkeypatch):
    monkeypatch.setenv("GW_SIG", "sig-value-123")
    url = f"http://127.0.0.1:9/{TOKEN}/v1"  # nothing listens on port 9
    models = {"agent": {"base_url": url, "model": "m", "max_retries": 0, "timeout": 5,
                        "headers_env": {"X-Sig": "GW_SIG"}}}  # fmt: skip
    with pytest.raises(EndpointError) as caught:
        _ask(Gateway.from_config(models))
    message = str(caught.value)
    assert f"models.agent (m at {redact(url)}): gave up after 1 attempt" in message
    assert TOKEN not in message
    # whatever a server or a proxy echoes is scrubbed of the URL, its path and the header value
    backend = OpenAIBackend(EndpointSpec.from_config("agent", models["agent"]))
    echoed = backend._scrub(f"POST {url}/chat/completions failed; X-Sig: sig-value-123")
    assert echoed == "POST ***/chat/completions failed; X-Sig: ***"


def test_a_job_finds_the_real_address_of_its_redacted_param_in_the_config():
    """Params carry the redacted binding; the job maps it back through the config's models and
    endpoints, and refuses an address the config does not hold."""
    with OpenAITestServer(reply="found", prefixes=[TOKEN]) as server:
        real = server.base_url.replace("/v1", f"/{TOKEN}/v1")
        config_models = {"judge": {"endpoint": "gw", "model": "m"}}
        endpoints = {"gw": {"base_url": real}}
        params = public_bindings(bind_endpoints(config_models, endpoints))
        assert TOKEN not in repr(params)
        env = JobEnv(models=params, bindings=config_models, endpoints=endpoints)
        assert _ask(env.gateway(), "judge") == "found"
        assert real_addresses(bind_endpoints(config_models, endpoints)) == {redact(real): real}
    with pytest.raises(ConfigError, match=r"models\.judge\.base_url: no address in the config"):
        JobEnv(models=params, bindings={}, endpoints={}).gateway()
