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


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One finished run of tests/configs/tiny.yaml (offline backend), made once per session.

    Tests read it as it is, or copy it (``tests.workflow.copy_run``) before they rerun or edit
    anything: the same tiny run used to be made from scratch by three test modules.
    """
    from tests.workflow import snakemake, workdir

    wd = workdir(tmp_path_factory.mktemp("tiny_run"))
    snakemake(wd)
    return wd


@pytest.fixture(scope="session")
def local_llm_server(tmp_path_factory):
    """The port of the served SmolLM2 (tests/local_llm_server.py), one server for every
    real-model test of the session; skips when the local-llm extra is not installed."""
    from tests.local_llm_server import serve

    yield from serve(tmp_path_factory)
