"""Pinned benchmark data: downloads over HTTP (a local server on 127.0.0.1 serving tiny stand-in
files) checked by sha256, the offline one-line error naming every missing file and where it goes,
the pins themselves against the real files, and `mnemoflow plan`'s one-line dry-run error."""

from __future__ import annotations

import hashlib
import json
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mnemoflow.commands.plan import dry_run_error
from mnemoflow.data import amemgym, memorybench
from mnemoflow.data.sources import cached_path, resolve_file, sha256_file
from mnemoflow.data.validate import DataError
from tests.shared_data import shared_file

REGISTRY = {"each.json": b'{"A": {}}\n', "domain.json": b'{"D": []}\n', "task.json": b'{"T": []}\n'}
STATS = b'{"domain": {}}\n'


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request lines in the test output
        pass


@pytest.fixture()
def server(tmp_path):
    """A local HTTP server (127.0.0.1 only) serving ``tmp_path/www``; yields its base URL."""
    root = tmp_path / "www"
    (root / "configs" / "datasets").mkdir(parents=True)
    for name, content in REGISTRY.items():
        (root / "configs" / "datasets" / name).write_bytes(content)
    (root / "configs" / memorybench.PAPER_STATS).write_bytes(STATS)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def online(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MNEMOFLOW_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture()
def pins(server, monkeypatch):
    """memorybench's registry and statistics pinned to the local server's stand-ins."""
    monkeypatch.setattr(memorybench, "CODE_URL", server + "configs/")
    sums = {name: hashlib.sha256(content).hexdigest() for name, content in REGISTRY.items()}
    monkeypatch.setattr(memorybench, "REGISTRY_FILES", sums)
    monkeypatch.setattr(memorybench, "PAPER_STATS_SHA256", hashlib.sha256(STATS).hexdigest())


def _spec(tmp_path: Path, **extra) -> dict:
    release = tmp_path / "release"
    release.mkdir(exist_ok=True)
    return {
        "loader": "memorybench",
        "source": {"path": str(release)},  # the Hub folder is there: only the registry is fetched
        "configs": str(tmp_path / "MemoryBench" / "configs" / "datasets"),
        "normalize": {"stats": str(tmp_path / "MemoryBench" / "configs" / memorybench.PAPER_STATS)},
        **extra,
    }


def test_download_true_fetches_the_registry_and_statistics_where_the_config_names_them(
    tmp_path, pins
):
    spec = _spec(tmp_path, download=True)
    memorybench.check(spec, "config benchmarks.mb")
    folder = Path(spec["configs"])
    for name, content in REGISTRY.items():
        assert (folder / name).read_bytes() == content
        assert sha256_file(folder / name) == memorybench.REGISTRY_FILES[name]
    assert Path(spec["normalize"]["stats"]).read_bytes() == STATS
    memorybench.check(spec, "config benchmarks.mb")  # present now: nothing fetched again


def test_a_download_with_another_checksum_is_refused_and_leaves_nothing(
    tmp_path, pins, monkeypatch
):
    monkeypatch.setattr(memorybench, "REGISTRY_FILES", {"each.json": "0" * 64})
    spec = _spec(tmp_path, download=True, normalize={})
    with pytest.raises(DataError) as info:
        memorybench.check(spec, "config benchmarks.mb")
    message = str(info.value)
    assert "\n" not in message and "checksum mismatch" in message and "0" * 64 in message
    assert f"place the verified file at {Path(spec['configs']) / 'each.json'}" in message
    assert sorted(p.name for p in Path(spec["configs"]).iterdir()) == []  # no partial file


def test_offline_names_every_missing_file_where_it_goes_and_its_pin(tmp_path, pins, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    spec = _spec(tmp_path, download=True)
    del spec["source"]  # the pinned Hub release, not in the (empty) cache either
    with pytest.raises(DataError) as info:
        memorybench.check(spec, "config benchmarks.mb")
    message = str(info.value)
    assert "\n" not in message and message.startswith("5 missing: ")
    assert f"THUIR/MemoryBench@{memorybench.HUB_REVISION}" in message
    for name, sha in memorybench.REGISTRY_FILES.items():
        assert f"{Path(spec['configs']) / name} (" in message and f"sha256 {sha}" in message
    assert f"{spec['normalize']['stats']} (" in message
    assert message.endswith('(offline: place each file there; docs/data.md "MemoryBench")')
    assert not Path(spec["configs"]).exists()  # offline: nothing fetched


def test_without_download_the_error_says_to_allow_it(tmp_path, pins):
    spec = _spec(tmp_path, normalize={})
    with pytest.raises(DataError, match=r"^3 missing: .*\(set download: true, or place each"):
        memorybench.check(spec, "config benchmarks.mb")


def test_a_pinned_url_is_downloaded_into_the_cache_over_http(server):
    sha = hashlib.sha256(STATS).hexdigest()
    source = {"url": server + f"configs/{memorybench.PAPER_STATS}", "sha256": sha, "download": True}
    path = resolve_file(source, "bench")
    assert path == cached_path(source, "bench") and path.read_bytes() == STATS
    with pytest.raises(DataError, match=r"^bench: cannot download http://127\.0\.0\.1:\d+/nope"):
        resolve_file({"url": server + "nope.json", "sha256": sha, "download": True}, "bench")


def test_the_pins_are_the_real_files():
    """The sha256 pinned for the registry and the paper's statistics are those of the files at
    THUIR/MemoryBench's pinned commit (a copy sits beside the checkout for tests only)."""
    root = shared_file("memorybench", "configs")
    for name, sha in memorybench.REGISTRY_FILES.items():
        assert sha256_file(root / "datasets" / name) == sha, name
    assert sha256_file(root / memorybench.PAPER_STATS) == memorybench.PAPER_STATS_SHA256


def test_amemgyms_missing_release_says_which_file_and_that_it_is_not_pinned(tmp_path):
    spec = {"loader": "amemgym", "source": {"path": str(tmp_path / "v1.base" / "data.json")}}
    with pytest.raises(DataError) as info:
        amemgym.check(spec, "config benchmarks.amemgym_v1")
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "v1.base" / "data.json") in message
    assert "AGI-Eval/AMemGym's v1.base/data.json" in message and "no revision or sha256" in message
    # a download of the unpinned release is refused, naming what to pin
    with pytest.raises(DataError, match=r"must be pinned: source.sha256 .* or source.revision"):
        amemgym.check({"loader": "amemgym", "download": True}, "config benchmarks.amemgym_v1")


def test_plans_dry_run_error_keeps_the_whole_list_of_missing_inputs():
    output = "\n".join(
        [
            "Building DAG of jobs...",
            "MissingInputException in rule normalize in file rules/feedback.smk, line 112:",
            "Missing input files for rule normalize:",
            "    output: results/mb/none/off_policy/step0/normalized.parquet",
            "    wildcards: benchmark=mb, system=none",
            "    affected files:",
            "        MemoryBench/configs/final_evaluate_summary_wo_details.json",
            "        MemoryBench/configs/datasets",
            "",
        ]
    )
    assert dry_run_error(output) == (
        "Missing input files for rule normalize: MemoryBench/configs/"
        "final_evaluate_summary_wo_details.json, MemoryBench/configs/datasets"
    )
    assert dry_run_error("ConfigError in file x, line 1:\nconfig foo: bad\n  File x") == (
        "config foo: bad"
    )


def _registry_for(tmp_path: Path) -> str:
    """A registry whose domain D holds datasets Locomo-0 (with a corpus) and NFCats."""
    folder = tmp_path / "MemoryBench" / "configs" / "datasets"
    folder.mkdir(parents=True)
    entries = [{"dataset_name": "Locomo-0"}, {"dataset_name": "NFCats"}]
    (folder / "each.json").write_text('{"Locomo-0": {}, "NFCats": {}}')
    (folder / "domain.json").write_text(json.dumps({"D": entries}))
    (folder / "task.json").write_text('{"T": []}')
    return str(folder)


def test_offline_with_the_registry_placed_every_file_of_the_sets_datasets_is_named(
    tmp_path, monkeypatch
):
    """The registry says which datasets the set reads: each of their files is named, with where
    it goes, in the one line (not "the snapshot's files", nor only the first missing one)."""
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    spec = {"loader": "memorybench", "set": "domain:D", "configs": _registry_for(tmp_path)}
    spec["download"] = True
    root = tmp_path / "cache" / "memorybench" / "THUIR__MemoryBench" / memorybench.HUB_REVISION
    files = "dataset/Locomo-0/dataset_dict.json, dataset/NFCats/dataset_dict.json, "
    files += "corpus/Locomo-0.jsonl"
    for _ in ("nothing placed", "an empty snapshot folder"):  # neither is enough
        with pytest.raises(DataError) as info:
            memorybench.check(spec, "config benchmarks.mb")
        message = str(info.value)
        assert "\n" not in message and f"; place {files} under {root})" in message
        assert message.endswith('each dataset/NAME/ folder whole; docs/data.md "MemoryBench")')
        root.mkdir(parents=True, exist_ok=True)
    (root / "dataset" / "NFCats").mkdir(parents=True)
    (root / "dataset" / "NFCats" / "dataset_dict.json").write_text("{}")
    with pytest.raises(DataError, match=r"; place dataset/Locomo-0/dataset_dict.json, corpus/Loc"):
        memorybench.check(spec, "config benchmarks.mb")
    (root / "dataset" / "Locomo-0").mkdir()
    (root / "dataset" / "Locomo-0" / "dataset_dict.json").write_text("{}")
    (root / "corpus").mkdir()
    (root / "corpus" / "Locomo-0.jsonl").write_text("")
    memorybench.check(spec, "config benchmarks.mb")  # every file of the set is there


def test_a_local_release_folder_without_the_sets_files_names_each(tmp_path):
    spec = {"loader": "memorybench", "set": "domain:D", "configs": _registry_for(tmp_path)}
    spec["source"] = {"path": str(tmp_path / "release")}
    (tmp_path / "release").mkdir()
    with pytest.raises(DataError) as info:
        memorybench.check(spec, "config benchmarks.mb")
    assert f"({tmp_path / 'release'} has no dataset/Locomo-0/dataset_dict.json, " in str(info.value)
    assert "corpus/Locomo-0.jsonl; place them there)" in str(info.value)
