"""Source resolution: local path, project cache, verified download, offline and checksum errors."""

from __future__ import annotations

import hashlib
import json

import pytest

from mnemoflow.cli import main
from mnemoflow.data.sources import cached_path, resolve_file, resolve_folder
from mnemoflow.data.validate import DataError

CONTENT = b'[{"hello": "world"}]\n'
SHA = hashlib.sha256(CONTENT).hexdigest()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("MNEMOFLOW_CACHE", str(root))
    monkeypatch.delenv("MNEMOFLOW_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return root


@pytest.fixture()
def upstream(tmp_path):
    """An 'upstream' file served through a file:// URL (urllib reads it like a download)."""
    path = tmp_path / "upstream" / "data.json"
    path.parent.mkdir()
    path.write_bytes(CONTENT)
    return path


def test_local_path_wins_and_is_checked(upstream):
    assert resolve_file({"path": str(upstream)}, "bench") == upstream
    assert resolve_file({"path": str(upstream), "sha256": SHA}, "bench") == upstream
    assert sorted(p.name for p in upstream.parent.iterdir()) == ["data.json"]  # nothing written
    with pytest.raises(DataError, match=r"^bench: checksum mismatch for .*data.json: expected"):
        resolve_file({"path": str(upstream), "sha256": "0" * 64}, "bench")


def test_cache_then_download(upstream, cache):
    source = {"url": upstream.as_uri(), "sha256": SHA}
    target = cache / "bench" / "url" / "data.json"
    assert cached_path(source, "bench") == target
    with pytest.raises(DataError) as info:
        resolve_file(source, "bench")
    assert str(info.value) == (
        f"bench: data.json is not available locally; place {upstream.as_uri()} at {target} "
        "(or set source.path), or set source.download: true"
    )
    assert resolve_file({**source, "download": True}, "bench") == target
    assert target.read_bytes() == CONTENT
    assert sorted(p.name for p in target.parent.iterdir()) == ["data.json"]  # no temp left
    upstream.unlink()
    assert resolve_file(source, "bench") == target  # now served from the cache
    # the verified hash is remembered next to the cached file (keyed by size and mtime)
    assert (target.parent / "data.json.sha256").read_text().split()[0] == SHA


def test_download_checksum_mismatch_leaves_nothing(upstream, cache):
    source = {"url": upstream.as_uri(), "sha256": "f" * 64, "download": True}
    with pytest.raises(DataError) as info:
        resolve_file(source, "bench")
    target = cache / "bench" / "url" / "data.json"
    assert str(info.value) == (
        f"bench: checksum mismatch for {upstream.as_uri()}: expected sha256 {'f' * 64}, "
        f"got {SHA}; place the verified file at {target}"
    )
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_cached_file_with_wrong_checksum(cache):
    source = {"repo": "org/data", "file": "d.json", "revision": "abc123", "sha256": SHA}
    target = cached_path(source, "bench")
    assert target == cache / "bench" / "org__data" / "abc123" / "d.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(CONTENT + b" ")
    with pytest.raises(DataError, match="checksum mismatch"):
        resolve_file(source, "bench")


def test_offline_and_unpinned(upstream, monkeypatch, cache):
    hub = {"repo": "org/data", "file": "d.json", "download": True}
    with pytest.raises(DataError, match=r"source.revision must pin a commit of org/data \(or"):
        resolve_file(hub, "bench")
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    with pytest.raises(DataError) as info:
        resolve_file({**hub, "revision": "abc123"}, "bench")
    assert str(info.value) == (
        "bench: offline, cannot download hf://datasets/org/data@abc123/d.json; place the file at "
        f"{cache / 'bench' / 'org__data' / 'abc123' / 'd.json'}"
    )


def test_a_hub_file_pinned_by_content_is_fetched_from_main_and_checked(monkeypatch, cache):
    """Without a commit, sha256 pins the file: ``main`` is fetched and must match it."""
    import huggingface_hub

    asked = []

    def fake_download(repo_id, filename, repo_type, revision, local_dir):
        asked.append((repo_id, filename, repo_type, revision))
        path = local_dir / filename
        path.write_bytes(CONTENT)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    hub = {"repo": "org/data", "file": "d.json", "sha256": SHA, "download": True}
    target = cache / "bench" / "org__data" / f"sha256-{SHA[:12]}" / "d.json"
    assert cached_path(hub, "bench") == target
    assert resolve_file(hub, "bench") == target and target.read_bytes() == CONTENT
    assert asked == [("org/data", "d.json", "dataset", "main")]
    with pytest.raises(
        DataError, match=r"checksum mismatch for hf://datasets/org/data@main/e.json"
    ):
        resolve_file({**hub, "file": "e.json", "sha256": "0" * 64}, "bench")
    assert not (cache / "bench" / "org__data" / "sha256-000000000000" / "e.json").exists()


def test_unpinned_sha_is_printed(upstream, capsys):
    resolve_file({"url": upstream.as_uri(), "download": True}, "bench")
    assert f"pin it with source.sha256: {SHA}" in capsys.readouterr().err


def test_unknown_source_key():
    with pytest.raises(DataError, match=r"bench: unknown source keys \['sha'\]"):
        resolve_file({"path": "x", "sha": "y"}, "bench")


def test_cli_offline_download_fails_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MNEMOFLOW_OFFLINE", "1")
    source = {"repo": "xiaowu0162/longmemeval-cleaned", "file": "longmemeval_s_cleaned.json"}
    source.update(revision="0123abc", download=True)
    out = tmp_path / "out"
    code = main(
        [
            "data",
            "prepare",
            "longmemeval",
            "--spec",
            json.dumps({"source": source}),
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("mnemoflow data: error: longmemeval: offline, cannot download ")
    assert "\n" not in err
    assert not out.exists()


def test_cli_checksum_mismatch_fails_with_one_line(upstream, tmp_path, capsys):
    spec = {"source": {"path": str(upstream), "sha256": "0" * 64}}
    out = tmp_path / "out"
    code = main(["data", "prepare", "locomo", "--spec", json.dumps(spec), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"mnemoflow data: error: locomo: checksum mismatch for {upstream}: expected sha256 "
        f"{'0' * 64}, got {SHA}; replace it with the official file"
    )
    assert not out.exists()


def fake_snapshot(files: dict[str, bytes], fail_after: int | None = None, calls=None):
    """A stand-in for huggingface_hub.snapshot_download writing ``files`` (maybe failing)."""

    def snapshot_download(repo_id, repo_type, revision, allow_patterns, local_dir):
        if calls is not None:
            calls.append((repo_id, repo_type, revision, allow_patterns))
        for n, (rel, content) in enumerate(files.items()):
            if fail_after is not None and n == fail_after:
                raise ConnectionError("connection reset")
            (local_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (local_dir / rel).write_bytes(content)
        (local_dir / ".cache" / "huggingface").mkdir(parents=True)
        return str(local_dir)

    return snapshot_download


FOLDER = {"repo": "org/bench", "revision": "c0ffee", "download": True}
REQUIRED = ["dataset/a/train/data.arrow", "corpus/a.jsonl"]


def test_folder_download_moves_the_selected_files_into_the_cache(monkeypatch, cache):
    import huggingface_hub

    calls = []
    files = {rel: rel.encode() for rel in REQUIRED}
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot(files, calls=calls))
    root = resolve_folder(FOLDER, "bench", REQUIRED, ["dataset/a/*", "corpus/a.jsonl"])
    assert root == cache / "bench" / "org__bench" / "c0ffee"
    assert calls == [("org/bench", "dataset", "c0ffee", ["dataset/a/*", "corpus/a.jsonl"])]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == sorted(
        REQUIRED
    )
    assert [p.name for p in root.parent.iterdir()] == ["c0ffee"]  # no temporary folder left
    # A second resolution finds the files and downloads nothing.
    monkeypatch.setattr(huggingface_hub, "snapshot_download", None)
    assert resolve_folder(FOLDER, "bench", REQUIRED, []) == root


def test_failed_or_incomplete_folder_download_leaves_nothing(monkeypatch, cache):
    import huggingface_hub

    files = {rel: b"x" for rel in REQUIRED}
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot(files, fail_after=1))
    with pytest.raises(DataError) as info:
        resolve_folder(FOLDER, "bench", REQUIRED, ["*"])
    root = cache / "bench" / "org__bench" / "c0ffee"
    assert str(info.value) == (
        "bench: cannot download hf://datasets/org/bench@c0ffee (ConnectionError); place "
        f"dataset/a/train/data.arrow, corpus/a.jsonl under {root}"  # every missing file
    )
    assert not root.exists() and list(root.parent.iterdir()) == []
    partial = {REQUIRED[0]: b"x"}
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot(partial))
    with pytest.raises(DataError, match=r"@c0ffee has no corpus/a.jsonl; check the dataset name"):
        resolve_folder(FOLDER, "bench", REQUIRED, ["*"])
    assert not root.exists() and list(root.parent.iterdir()) == []


def test_folder_offline_and_unpinned(monkeypatch, cache):
    root = cache / "bench" / "org__bench" / "c0ffee"
    with pytest.raises(DataError) as info:
        resolve_folder({**FOLDER, "download": False}, "bench", REQUIRED, ["*"])
    assert str(info.value) == (
        f"bench: dataset/a/train/data.arrow, corpus/a.jsonl is not available locally; place "
        f"hf://datasets/org/bench@c0ffee's dataset/a/train/data.arrow, corpus/a.jsonl under {root} "
        "(or set source.path), or set source.download: true"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match=r"^bench: offline, cannot download hf://datasets/org/"):
        resolve_folder(FOLDER, "bench", REQUIRED, ["*"])
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(DataError, match="source.revision must pin a commit of org/bench"):
        resolve_folder({**FOLDER, "revision": None}, "bench", REQUIRED, ["*"])


def test_local_source_file_is_the_prepare_rules_input(upstream, tmp_path):
    from mnemoflow.data.sources import local_source_file

    assert local_source_file({"source": {"path": str(upstream)}}) == [str(upstream)]
    assert local_source_file({"source": {"path": str(tmp_path / "missing.json")}}) == []
    assert local_source_file({"source": {"path": str(upstream.parent)}}) == []  # a folder
    assert local_source_file({"source": {"repo": "org/data", "file": "d.json"}}) == []
    assert local_source_file({"loader": "synthetic"}) == []
