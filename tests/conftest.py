"""Shared fixtures: repository paths and the real benchmark data beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared_data import REPO, shared_file


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (tests/shared_data.py); skips only when the folder is absent."""
    return shared_file()
