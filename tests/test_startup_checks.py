"""What the workflow refuses when its Snakefile is parsed, checked function by function (the
malformed-input corpus runs a few of them through a dry run): endpoint addresses, benchmark
sources, parameter types, installed extras, config files; and each role's binding said aloud."""

from __future__ import annotations

import pytest

from mnemoflow.config_schema import read_config_file
from mnemoflow.data.registry import check_benchmarks
from mnemoflow.data.sources import check_available
from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError, check_types
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.types import EndpointSpec, binding_text, played_by
from mnemoflow.llm.urls import check_base_url, url_host
from mnemoflow.memory import products
from mnemoflow.memory.base import check_installed
from mnemoflow.planning.plan import Line, Plan
from mnemoflow.prices import price_table
from mnemoflow.report.summary import models_markdown

WHERE = "config models.judge.base_url"


@pytest.mark.parametrize(
    "url",
    ["http://localhost:8000/v1", "https://api.openai.com/v1", "http://[::1]:8000", "HTTPS://h"],
)
def test_an_http_address_passes(url):
    check_base_url(url, WHERE)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "an http(s) address without spaces, got 'not a url'"),
        ("", "an http(s) address without spaces, got ''"),
        ("localhost:8000/v1", "(no scheme), got 'localhost:8000/v1'; e.g. http://localhost:8000"),
        ("ftp://host/v1", "got scheme 'ftp' in 'ftp://host/v1'"),
        ("http:///v1", "an http(s) address with a host, got 'http:///v1'"),
        ("http://host:99999/v1", "the port of 'http://host:99999/v1' is not a number 0-65535"),
        ("http://host:port/v1", "the port of 'http://host:port/v1' is not a number"),
        (8000, "an http(s) address, got 8000"),
    ],
)
def test_a_malformed_address_is_one_line_naming_the_key(url, message):
    with pytest.raises(ConfigError) as info:
        check_base_url(url, WHERE)
    assert str(info.value).startswith(f"{WHERE}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_every_place_an_address_is_given_is_checked():
    with pytest.raises(ConfigError, match=r"^config models.agent.base_url: .*scheme 'ftp'"):
        EndpointSpec.from_config("agent", {"base_url": "ftp://h/v1", "model": "m"})
    with pytest.raises(ConfigError, match=r"^config endpoints.site.base_url: .*no scheme"):
        bind_endpoints({}, {"site": {"base_url": "h:1/v1"}})
    # a managed endpoint's symbolic address is no URL to check
    spec = EndpointSpec.from_config("agent", {"base_url": "endpoint://q", "model": "m"})
    assert spec.base_url == "endpoint://q"


def test_url_host_keeps_the_host_and_port_only():
    assert url_host("https://api.example.org/v1/deployments/x?api-version=1") == "api.example.org"
    assert url_host("http://127.0.0.1:8000/v1") == "127.0.0.1:8000"
    assert url_host("http://[::1]:8000/v1") == "[::1]:8000"
    assert url_host(None) == ""


def test_an_offline_role_carrying_an_address_or_key_is_refused():
    for extra in ({"base_url": "http://h:1/v1"}, {"api_key_env": "KEY"}):
        with pytest.raises(ConfigError, match=r"^config models.judge: backend offline runs"):
            EndpointSpec.from_config("judge", {"backend": "offline", **extra})
    # a site file rebinding a named endpoint to the offline model stays legal, and says so
    models = bind_endpoints(
        {"judge": {"endpoint": "openai", "model": "gpt-4o-mini"}, "agent": {}},
        {"openai": {"backend": "offline"}},
    )
    assert models["judge"] == {"backend": "offline", "endpoint": "openai"}
    spec = EndpointSpec.from_config("judge", models["judge"])
    assert binding_text(spec) == "offline (endpoint openai; model ignored)"
    table = "\n".join(models_markdown(played_by(models, ["judge", "agent"])))
    assert "| judge | offline (endpoint openai; model ignored) | offline-heuristic | openai |" in (
        table
    )
    assert played_by(models, ["judge", "agent"]) == {
        "agent": {"backend": "offline", "model": "offline-heuristic"},
        "judge": {
            "backend": "offline (endpoint openai; model ignored)",
            "model": "offline-heuristic",
            "endpoint": "openai",
        },
    }


def test_each_binding_names_its_host():
    models = bind_endpoints(
        {
            "agent": {"endpoint": "site", "model": "gpt-4o-mini"},
            "judge": {"base_url": "http://127.0.0.1:8000/v1/", "model": "q"},
            "user": {"endpoint": "gpu", "model": "Qwen/Qwen3-8B"},
        },
        {
            "site": {"base_url": "https://api.example.org/v1", "api_key_env": "K"},
            "gpu": {"serve": "vllm serve m --port {port}"},
        },
    )
    played = played_by(models, ["agent", "judge", "user"])
    assert played["agent"]["host"] == "api.example.org"
    assert played["judge"]["host"] == "127.0.0.1:8000"
    assert played["user"]["host"] == "managed endpoint gpu"
    specs = {role: EndpointSpec.from_config(role, models[role]) for role in played}
    assert binding_text(specs["agent"]) == "gpt-4o-mini at api.example.org (endpoint site)"
    assert binding_text(specs["judge"]) == "q at 127.0.0.1:8000"
    # mnemoflow plan says the same, one line per role it plans
    plan = Plan({**specs, "embedder": EndpointSpec("embedder")}, price_table())
    plan.add(Line("b", "s", "qa", "agent", "answer", calls=2))
    plan.add(Line("b", "s", "qa", "embedder", "embed", calls=2))
    text = plan.render()
    assert "role agent: gpt-4o-mini at api.example.org (endpoint site)" in text
    assert "role embedder: offline heuristic" in text
    assert plan.to_dict()["bindings"]["agent"] == "gpt-4o-mini at api.example.org (endpoint site)"


def test_parameter_types_name_the_key_path_and_the_value():
    defaults = {"users": 4, "rate": 0.3, "start": "2023", "flag": True}
    check_types({"users": 2, "rate": 1, "start": "x", "flag": False}, defaults, "w")
    for given, message in [
        ({"users": "two"}, "w.users: an integer, got 'two'"),
        ({"users": True}, "w.users: an integer, got True"),
        ({"rate": "high"}, "w.rate: a number, got 'high'"),
        ({"start": 2023}, "w.start: a string, got 2023"),
    ]:
        with pytest.raises(ConfigError) as info:
            check_types(given, defaults, "w")
        assert str(info.value) == message


def test_benchmarks_are_checked_by_their_loader():
    with pytest.raises(ConfigError, match=r"^config benchmarks.x.loader: unknown benchmark loader"):
        check_benchmarks({"x": {"loader": "nope"}}, ["x"])
    bad = {"loader": "synthetic_feedback", "params": {"items": "16"}}
    with pytest.raises(ConfigError, match=r"^config benchmarks.fb.params.items: an integer"):
        check_benchmarks({"fb": bad}, ["fb"])
    # only the run's benchmarks are checked
    check_benchmarks({"x": {"loader": "nope"}, "s": {"loader": "synthetic"}}, ["s"])


def test_a_source_is_present_or_an_allowed_pinned_download(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MNEMOFLOW_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    (tmp_path / "here.json").write_text("[]")
    check_available({"path": str(tmp_path / "here.json")}, "locomo")
    url = {"url": "https://example.org/locomo10.json", "sha256": "0" * 64}
    with pytest.raises(DataError, match="is not available locally; place"):
        check_available(url, "locomo")  # not cached, no download allowed
    check_available({**url, "download": True}, "locomo")  # pinned: fetched by the prepare job
    with pytest.raises(DataError, match=r"must be pinned: source.sha256 .* or source.revision"):
        check_available({"url": url["url"], "download": True}, "locomo")
    repo = {"repo": "o/r", "file": "f.json", "download": True}
    with pytest.raises(DataError, match="must be pinned"):
        check_available(repo, "longmemeval")
    check_available({**repo, "revision": "abc"}, "longmemeval")
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    with pytest.raises(DataError, match="offline, cannot download"):
        check_available({**url, "download": True}, "locomo")
    # a cached copy needs no download
    cached = tmp_path / "cache" / "locomo" / "url" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("[]")
    check_available(url, "locomo")
    # a folder (MemoryBench): the pinned snapshot in the cache
    folder = {"repo": "THUIR/MemoryBench", "revision": "c0ffee"}
    with pytest.raises(DataError, match="c0ffee is not available locally"):
        check_available(folder, "memorybench", folder=True)
    with pytest.raises(DataError, match="offline, cannot download"):
        check_available({**folder, "download": True}, "memorybench", folder=True)
    (tmp_path / "cache" / "memorybench" / "THUIR__MemoryBench" / "c0ffee").mkdir(parents=True)
    check_available(folder, "memorybench", folder=True)


def test_a_product_whose_extra_is_missing_is_refused_with_the_install_command(monkeypatch):
    """Found without importing anything: the module's spec and the distribution's version (here
    an installation whose kuzu is missing, the rest at the pinned versions)."""
    systems = {"mem0_graph": {"type": "mem0_graph"}, "bm25": {"type": "bm25_message"}}
    pinned = {"mem0ai": "1.0.11", "kuzu": "0.11.3", "rank-bm25": "0.2.2"}
    monkeypatch.setattr(
        products.importlib.util, "find_spec", lambda name, *a: None if name == "kuzu" else name
    )
    monkeypatch.setattr(products.metadata, "version", pinned.get)
    with pytest.raises(ConfigError) as info:
        check_installed(systems, ["mem0_graph", "bm25"])
    assert str(info.value).startswith(
        "config systems.mem0_graph: mem0_graph needs kuzu==0.11.3 (module 'kuzu' is not "
        "installed); run: pip install -e '.[products]' (or: make install-products)"
    )
    check_installed(systems, ["bm25"])  # a defined but unused product is not checked
    monkeypatch.setattr(products.metadata, "version", lambda name: "0.0.1")
    with pytest.raises(ConfigError, match=r"a_mem needs a-mem==0.2.6, found 0.0.1; run: .*amem"):
        check_installed({"a": {"type": "a_mem"}}, ["a"])


def test_a_config_file_error_names_the_file_and_its_line_or_byte(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("run:\n  systems: [none\nmodels: {}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: line 3, column 7: YAML syntax error: "):
        read_config_file(path)
    path.write_bytes(b"a: 1\n" + b"#" * 31_000 + b"\xff\n")
    with pytest.raises(ConfigError) as info:
        read_config_file(path)
    assert str(info.value) == f"{path}: not UTF-8: byte 0xff at offset 31,005 (line 2)"
    path.write_text("a: [1, 2]\n")
    assert read_config_file(path) == {"a": [1, 2]}


def test_a_benchmark_s_reader_is_checked_with_its_key_path(tmp_path):
    from mnemoflow.protocols.static_qa import check_reader

    where = "config benchmarks.lme"
    check_reader({}, where)
    check_reader({"reader": {"name": "locomo", "mode": "retrieval"}}, where)
    with pytest.raises(ConfigError) as info:
        check_reader({"reader": "nosuch"}, where)
    assert str(info.value) == (
        "config benchmarks.lme.reader: one of ['generic', 'locomo', 'longmemeval'], got 'nosuch'"
    )
    missing = str(tmp_path / "log.jsonl")
    reader = {"name": "longmemeval", "mode": "retrieval", "retrieval_log": missing}
    with pytest.raises(ConfigError, match=r"^config benchmarks.lme.reader.retrieval_log: no such"):
        check_reader({"reader": reader}, where)


def test_every_benchmarks_missing_data_is_named_in_the_one_line(tmp_path):
    """Not only the first benchmark's: a preset of several sets is placed in one round; two
    benchmarks missing the same file name it once."""
    a = {"loader": "locomo", "source": {"path": str(tmp_path / "a.json")}}
    b = {"loader": "locomo", "source": {"path": str(tmp_path / "b.json")}}
    with pytest.raises(ConfigError) as info:
        check_benchmarks({"a": a, "a2": dict(a), "b": b}, ["a", "a2", "b"])
    message = str(info.value)
    assert "\n" not in message and message.startswith("config benchmarks.a, benchmarks.a2: ")
    assert message.count(str(tmp_path / "a.json")) == 1
    assert f" | config benchmarks.b: source.path {tmp_path / 'b.json'} does not exist" in message
    (tmp_path / "a.json").write_text("[]")
    with pytest.raises(ConfigError, match=r"^config benchmarks.b: source.path \S+b.json does not"):
        check_benchmarks({"a": a, "a2": dict(a), "b": b}, ["a", "a2", "b"])
