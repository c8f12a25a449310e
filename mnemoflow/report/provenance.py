"""What produced a report: software versions, the git commit, and the config with secrets masked.

A score is only reproducible together with the code and settings behind it, so the report carries
both. The config holds environment-variable *names* for keys, never keys; values under key-like
names are masked anyway, in case someone pasted a key where a name belongs.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

#: Distributions whose versions decide the numbers (the workflow engine, table I/O, the client).
PACKAGES = ("snakemake", "pandas", "pyarrow", "numpy", "openai", "matplotlib", "mnemoflow")

_SECRET = re.compile(r"(api[_-]?key|secret|password|token|authorization)$", re.IGNORECASE)
_MASK = "***"

_REPO = Path(__file__).resolve().parents[2]


def _source_version() -> str | None:
    """mnemoflow's version from pyproject.toml when it runs from a source tree, not installed."""
    try:
        project = tomllib.loads((_REPO / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    version = project.get("project", {}).get("version")
    return f"{version} (source tree)" if version else None


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        if name == "mnemoflow":
            return _source_version() or "not installed"
        return "not installed"


def git_commit(repo: str | Path = _REPO) -> str | None:
    """HEAD's commit, with "+dirty" when tracked files differ from it; None outside a checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def versions(repo: str | Path | None = None) -> dict[str, str]:
    """Python, platform, the packages in :data:`PACKAGES` and the git commit.

    The commit is the checkout of ``repo``; by default of the package's own source tree, or else
    of the working directory (where Snakemake runs the workflow when mnemoflow is installed).
    """
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    found.update({name: package_version(name) for name in PACKAGES})
    commit = git_commit(repo) if repo is not None else git_commit(_REPO) or git_commit(Path.cwd())
    found["git commit"] = commit or "unknown (not a git checkout)"
    return found


def redact(config: Any) -> Any:
    """A copy of ``config`` with values under key-like names (``api_key``, ``token``) masked.

    Names ending in ``_env`` hold the *name* of an environment variable and are kept.
    """
    if isinstance(config, dict):
        out = {}
        for key, value in config.items():
            secret = isinstance(key, str) and _SECRET.search(key) and not key.endswith("_env")
            out[key] = _MASK if secret and value not in (None, "") else redact(value)
        return out
    if isinstance(config, list | tuple):
        return [redact(item) for item in config]
    return config
