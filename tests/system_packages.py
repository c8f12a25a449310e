"""Install Debian packages a test needs (SLURM, Chromium) when they are missing.

CI starts from a bare machine and may only set itself up from the repository's own files, so the
tests that need system programs install them with apt-get, as root. When that is impossible (not
root, no apt-get, offline) the caller gets the reason and skips with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable


def apt_install(packages: list[str], still_missing: Callable[[], list[str]]) -> str | None:
    """Install ``packages`` if ``still_missing()`` names a program; why it cannot, or None."""
    if not still_missing():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{still_missing()} missing; `apt-get install -y {' '.join(packages)}` needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", *packages]
    for command in (["apt-get", "update", "-qq"], install):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            return f"`{' '.join(command)}` failed: {tail[0]}"
    missing = still_missing()
    return f"still missing after apt-get: {missing}" if missing else None
