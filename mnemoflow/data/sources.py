"""Where benchmark files come from: a local path, the project cache, or a pinned download.

A benchmark's ``source`` (in config.yaml) is resolved in this order:

1. ``path``: a local file or folder, used as it is (checked against ``sha256`` when given);
2. the project cache, ``data/cache/<benchmark>/...`` under the repository, or ``$MNEMOFLOW_CACHE``;
3. a download, only when ``download: true`` and not offline (``MNEMOFLOW_OFFLINE=1`` or
   ``HF_HUB_OFFLINE=1``): a Hugging Face dataset file (``repo`` + ``file`` + ``revision``, through
   ``huggingface_hub``) or a ``url``. The file lands in a temporary name, is checked against
   ``sha256`` and only then renamed into the cache, so a failed download leaves nothing behind.

Offline, or on a checksum mismatch, resolution stops with one line that says which file to place
where. Nothing is fetched at import time: ``huggingface_hub`` is imported only to download.
A download must be pinned so that results are reproducible: by ``revision`` (a commit, not a
branch), or by ``sha256`` (the content; the Hub's ``main`` is fetched and must match it). When
``sha256`` is not pinned yet, the computed hash is printed so that it can be added to config.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.data.validate import DataError

ROOT = Path(__file__).resolve().parents[2]
SOURCE_KEYS = {"path", "repo", "file", "revision", "sha256", "url", "download", "files"}


@dataclass(frozen=True)
class BenchmarkInfo:
    """What ``mnemoflow data list`` says about a benchmark: provenance, licence, expected sizes."""

    name: str
    title: str
    licence: str
    homepage: str
    sources: dict[str, dict[str, Any]]  # variant -> default source spec
    counts: str = ""  # the official sizes, as a sentence
    notes: str = ""


CATALOG: dict[str, BenchmarkInfo] = {}


def describe(info: BenchmarkInfo) -> BenchmarkInfo:
    """Add a benchmark to the catalogue printed by ``mnemoflow data list``."""
    CATALOG[info.name] = info
    return info


def cache_root() -> Path:
    """The project cache: ``$MNEMOFLOW_CACHE`` or ``data/cache`` in the repository."""
    env = os.environ.get("MNEMOFLOW_CACHE")
    return Path(env).expanduser() if env else ROOT / "data" / "cache"


def offline() -> bool:
    return any(
        os.environ.get(k, "") not in ("", "0") for k in ("MNEMOFLOW_OFFLINE", "HF_HUB_OFFLINE")
    )


def sha256_file(path: str | os.PathLike, block: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def _check_source(source: Any, benchmark: str) -> dict[str, Any]:
    if not isinstance(source, dict):
        raise DataError(f"{benchmark}: 'source' must be a mapping (path, or repo/file/revision)")
    unknown = sorted(set(source) - SOURCE_KEYS)
    if unknown:
        raise DataError(f"{benchmark}: unknown source keys {unknown}; known: {sorted(SOURCE_KEYS)}")
    return source


def _verified(path: Path, expected: str | None, label: str) -> Path:
    """``path`` if its sha256 is ``expected``.

    Files in the project cache keep the verified hash in a ``.sha256`` sidecar keyed by size and
    mtime, so a 2.7 GB file is hashed once; files at a user's ``path`` are hashed every time
    (nothing is written next to the user's data).
    """
    if not expected:
        return path
    stat = path.stat()
    sidecar = path.with_name(path.name + ".sha256")
    stamp = f"{stat.st_size} {stat.st_mtime_ns}"
    in_cache = path.resolve().is_relative_to(cache_root().resolve())
    if in_cache and sidecar.exists():
        parts = sidecar.read_text().split()
        if len(parts) == 3 and " ".join(parts[1:]) == stamp and parts[0] == expected.lower():
            return path
    actual = sha256_file(path)
    if actual != expected.lower():
        raise DataError(
            f"{label}: checksum mismatch for {path}: expected sha256 {expected}, got {actual}; "
            f"replace it with the official file"
        )
    if in_cache:
        try:
            sidecar.write_text(f"{actual} {stamp}\n")
        except OSError:
            pass  # a read-only cache: verify again next time
    return path


def _origin(source: dict[str, Any]) -> str:
    if source.get("url"):
        return str(source["url"])
    revision = _hub_revision(source)
    return f"hf://datasets/{source.get('repo')}@{revision}/{source.get('file', '')}".rstrip("/")


def _hub_revision(source: dict[str, Any]) -> str:
    """The commit to fetch: the pinned one, else ``main`` when sha256 pins the content."""
    if source.get("revision"):
        return str(source["revision"])
    return "main" if source.get("sha256") else "<revision>"


def _cache_folder(source: dict[str, Any]) -> str:
    """The cache folder of a Hub file: its commit, or its pinned content hash."""
    if source.get("revision"):
        return str(source["revision"])
    return f"sha256-{str(source['sha256'])[:12].lower()}" if source.get("sha256") else "unpinned"


def cached_path(source: dict[str, Any], benchmark: str) -> Path:
    """Where the cache keeps the file of a download spec."""
    root = cache_root() / benchmark
    if source.get("url"):
        return root / "url" / Path(str(source["url"]).split("?")[0]).name
    repo = str(source["repo"]).replace("/", "__")
    return root / repo / _cache_folder(source) / str(source["file"])


def source_of(spec: dict[str, Any], default: dict[str, Any]) -> Any:
    """A benchmark entry's ``source``, else its loader's catalogued ``default`` with the entry's
    ``download`` flag, so ``download: true`` beside ``loader:`` allows fetching the pinned file."""
    if spec.get("source"):
        return spec["source"]
    return {**default, "download": bool(spec.get("download", False))}


def local_source_file(spec: dict[str, Any]) -> list[str]:
    """``[source.path]`` when it names an existing local file, else ``[]``.

    The workflow's prepare rule takes this as its input, so replacing a benchmark's local file
    re-runs prepare. Downloads and folders give nothing: a download is pinned by revision or
    sha256 (a config param), and a folder's contents are not one file Snakemake can date.
    """
    source = spec.get("source")
    if not isinstance(source, dict) or not source.get("path"):
        return []
    path = Path(str(source["path"])).expanduser()
    return [str(path)] if path.is_file() else []


def resolve_file(source: Any, benchmark: str) -> Path:
    """The local file for ``source``: its ``path``, the cached copy, or a verified download."""
    source = _check_source(source, benchmark)
    expected = source.get("sha256")
    if source.get("path"):
        path = Path(str(source["path"])).expanduser()
        if path.is_file():
            return _verified(path, expected, benchmark)
        if not (source.get("repo") or source.get("url")):
            raise DataError(f"{benchmark}: source.path {path} does not exist; place the file there")
    if not (source.get("url") or (source.get("repo") and source.get("file"))):
        raise DataError(f"{benchmark}: source needs 'path', 'url', or 'repo' + 'file'")
    target = cached_path(source, benchmark)
    if target.is_file():
        return _verified(target, expected, benchmark)
    origin = _origin(source)
    _check_may_download(
        source, benchmark, target.name, origin, f"{origin} at {target}", f"the file at {target}"
    )
    return _download(source, target, benchmark)


def _check_may_download(
    source: dict[str, Any], benchmark: str, missing: str, origin: str, copy: str, placed: str
) -> None:
    """A missing file is downloaded only when the source says ``download: true`` and the run is
    not offline; otherwise the error says what to place where (``copy``: the remote file and
    where it goes; ``placed``: the same for the offline message)."""
    if not source.get("download"):
        raise DataError(
            f"{benchmark}: {missing} is not available locally; place {copy} "
            "(or set source.path), or set source.download: true"
        )
    if offline():
        raise DataError(f"{benchmark}: offline, cannot download {origin}; place {placed}")


def fetch_to(source: dict[str, Any], target: Path, benchmark: str) -> Path:
    """Download a pinned ``url`` (``source``: url and sha256) to ``target`` itself, not the cache:
    a small file a config names by path (MemoryBench's registry). Checked before it is moved."""
    if not source.get("sha256"):
        raise DataError(f"{benchmark}: {source.get('url')} must be pinned by sha256 to download")
    return _download(source, Path(target), benchmark)


def _download(source: dict[str, Any], target: Path, benchmark: str) -> Path:
    if source.get("repo") and not (source.get("revision") or source.get("sha256")):
        raise DataError(
            f"{benchmark}: source.revision must pin a commit of {source['repo']} (or "
            "source.sha256 the file's content) to download"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        try:
            if source.get("url"):
                tmp = tmpdir / target.name
                with urllib.request.urlopen(str(source["url"])) as response, tmp.open("wb") as out:
                    shutil.copyfileobj(response, out, 1 << 22)
            else:
                from huggingface_hub import hf_hub_download  # imported only to download

                tmp = Path(
                    hf_hub_download(
                        repo_id=str(source["repo"]),
                        filename=str(source["file"]),
                        repo_type="dataset",
                        revision=_hub_revision(source),
                        local_dir=tmpdir,
                    )
                )
        except Exception as exc:  # network, auth, missing file: one line, nothing left
            raise DataError(
                f"{benchmark}: cannot download {_origin(source)} ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}); place the file at {target}"
            ) from exc
        actual = sha256_file(tmp)
        expected = source.get("sha256")
        if expected and actual != expected.lower():
            raise DataError(
                f"{benchmark}: checksum mismatch for {_origin(source)}: expected sha256 "
                f"{expected}, got {actual}; place the verified file at {target}"
            )
        os.replace(tmp, target)
        if not expected:
            print(
                f"{benchmark}: downloaded {target.name}; pin it with source.sha256: {actual}",
                file=sys.stderr,
            )
        return target
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def resolve_folder(source: Any, benchmark: str, required: list[str], patterns: list[str]) -> Path:
    """A folder holding every path in ``required``: ``path``, the cache, or a pinned snapshot.

    For folders the pinned ``revision`` (a commit hash) is the integrity check: the Hub addresses
    files by content under a commit, and ``huggingface_hub`` verifies what it downloads.
    """
    source = _check_source(source, benchmark)
    if source.get("path"):
        root = Path(str(source["path"])).expanduser()
        if root.is_dir():
            missing = [rel for rel in required if not (root / rel).exists()]
            if missing:
                named = ", ".join(missing)
                raise DataError(f"{benchmark}: {root} has no {named}; place them there")
            return root
        if not source.get("repo"):
            raise DataError(f"{benchmark}: source.path {root} is not a folder")
    if not source.get("repo"):
        raise DataError(f"{benchmark}: source needs 'path' (a folder) or 'repo' + 'revision'")
    repo = str(source["repo"])
    root = _folder_cache(source, benchmark)
    missing = [rel for rel in required if not (root / rel).exists()]
    if not missing:
        return root
    origin = f"hf://datasets/{repo}@{source.get('revision') or '<revision>'}"
    named = ", ".join(missing)
    _check_may_download(
        source,
        benchmark,
        named,
        origin,
        f"{origin}'s {named} under {root}",
        f"{named} under {root}",
    )
    if not source.get("revision"):
        raise DataError(f"{benchmark}: source.revision must pin a commit of {repo} to download")
    _download_folder(source, root, benchmark, required, patterns)
    return root


def _folder_cache(source: dict[str, Any], benchmark: str) -> Path:
    """Where the cache keeps the snapshot of a folder source (its pinned revision)."""
    repo = str(source["repo"]).replace("/", "__")
    return cache_root() / benchmark / repo / str(source.get("revision") or "unpinned")


def check_available(
    source: Any,
    benchmark: str,
    *,
    folder: bool = False,
    origin: str = "",
    required: Sequence[str] = (),
) -> None:
    """What :func:`resolve_file` (:func:`resolve_folder` with ``folder``) will find, checked when
    the workflow starts and without reading, hashing or fetching anything: the local ``path``,
    the cached copy, or a download the source allows (``download: true``, pinned, not offline).
    A missing file is then refused before any job, not by the prepare job; ``origin`` says where
    the file of a local ``path`` comes from; ``required``: the paths a folder must hold, every
    missing one named (else the folder alone is looked for)."""
    source = _check_source(source, benchmark)
    if source.get("path"):
        path = Path(str(source["path"])).expanduser()
        absent = [rel for rel in required if not (path / rel).exists()]
        if path.is_dir() and absent:  # as resolve_folder, which reads this folder only
            raise DataError(f"{path} has no {', '.join(absent)}; place them there")
        if path.exists():
            return  # its checksum is checked when it is read
        if not (source.get("repo") or source.get("url")):
            raise DataError(
                f"source.path {path} does not exist; place {origin or 'the file'} there (or "
                "allow a pinned download, docs/data.md)"
            )
    missing: list[str] = []
    if folder and source.get("repo"):
        target = _folder_cache(source, benchmark)
        missing = [rel for rel in required if not (target / rel).exists()]
        if target.is_dir() and not missing:
            return
        origin = f"hf://datasets/{source['repo']}@{source.get('revision') or '<revision>'}"
        pinned = bool(source.get("revision"))
    elif source.get("url") or (source.get("repo") and source.get("file")):
        target = cached_path(source, benchmark)
        if target.is_file():
            return
        origin = _origin(source)
        pinned = bool(source.get("sha256") or (source.get("repo") and source.get("revision")))
    else:
        raise DataError("source needs 'path', 'url', or 'repo' + 'file' (a folder: 'repo')")
    placed, copy = target, f"{origin} at {target}"
    if folder and source.get("repo"):
        files = ", ".join(missing) if missing else "the snapshot's files"
        placed, copy = f"{files} under {target}", f"{origin}'s {files} under {target}"
    _check_may_download(source, benchmark, target.name, origin, copy, placed)
    if not pinned:
        raise DataError(
            f"a download of {origin} must be pinned: source.sha256 (the file's content) or "
            "source.revision (a commit of the dataset)"
        )


def _download_folder(
    source: dict[str, Any], root: Path, benchmark: str, required: list[str], patterns: list[str]
) -> None:
    """Snapshot the selected files into a temporary folder beside ``root``, check that every
    required path came, then move the files in: a failed download leaves ``root`` untouched."""
    repo, revision = str(source["repo"]), str(source["revision"])
    origin = f"hf://datasets/{repo}@{revision}"
    root.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        try:
            from huggingface_hub import snapshot_download  # imported only to download

            snapshot_download(
                repo_id=repo,
                repo_type="dataset",
                revision=revision,
                allow_patterns=patterns,
                local_dir=tmpdir,
            )
        except Exception as exc:
            missing = [rel for rel in required if not (root / rel).exists()]
            raise DataError(
                f"{benchmark}: cannot download {origin} ({type(exc).__name__}); place "
                f"{', '.join(missing) or 'the files'} under {root}"
            ) from exc
        still = [rel for rel in required if not ((tmpdir / rel).exists() or (root / rel).exists())]
        if still:
            raise DataError(
                f"{benchmark}: {origin} has no {', '.join(still)}; check the dataset name and "
                "revision"
            )
        for path in sorted(tmpdir.rglob("*")):
            rel = path.relative_to(tmpdir)
            if path.is_dir() or rel.parts[0] == ".cache":  # huggingface_hub's own metadata
                continue
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, root / rel)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
