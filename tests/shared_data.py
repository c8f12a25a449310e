"""Where the real benchmark data lives, for every test that reads it: ``../shared/data``.

The data sits beside the checkout (``/work/main`` -> ``/work/shared/data``); a git worktree under
``wt/`` looks one folder further up. It is never copied into the repository. A real-data test
skips, with the reason, only when that folder is genuinely absent: when it exists, a missing or
renamed file inside it is a failure, not a skip, so a moved file cannot silently hide a regression.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def find_shared_data() -> Path | None:
    """The first ``shared/data`` beside the checkout or beside its worktrees folder, or None."""
    for parent in (REPO.parent, REPO.parent.parent):
        candidate = parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


#: The folder, or None when there is no ``shared/data`` beside the checkout.
SHARED_DATA = find_shared_data()

#: Mark for tests that read real data: skipped only when ``../shared/data`` is absent.
needs_shared_data = pytest.mark.skipif(
    SHARED_DATA is None, reason="../shared/data is absent (real benchmark data beside the checkout)"
)


def shared_file(*parts: str) -> Path:
    """A path inside ``../shared/data``; skips the calling test only if the folder is absent."""
    if SHARED_DATA is None:
        pytest.skip("../shared/data is absent (real benchmark data beside the checkout)")
    return SHARED_DATA.joinpath(*parts)
