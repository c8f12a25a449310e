"""A stand-in for ``vllm run-batch`` where there is no GPU: ``python -m mnemoflow.testing.run_batch
-i INPUT -o OUTPUT --model M [--reply TEXT]``.

It reads a Batch-API input file (one ``{"custom_id", "method", "url", "body"}`` a line) and writes
the output file ``vllm run-batch`` writes: one ``{"id", "custom_id", "response": {"status_code",
"request_id", "body"}, "error"}`` line per request, the body the project's test server answers the
request with (``--reply``: a fixed text; default: its echo). It says on stdout how many requests
it drained and in which SLURM job, if any (for a test that checks where it ran).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

from mnemoflow.testing.openai_server import OpenAITestServer


def drain(source: Path, target: Path, model: str, reply: str | None = None) -> int:
    """Answer every line of ``source`` into ``target``; the number of lines."""
    server = OpenAITestServer(reply=reply, model=model)
    lines = [json.loads(raw) for raw in source.read_text().splitlines() if raw.strip()]
    with open(target.with_name(target.name + ".part"), "w") as out:
        for line in lines:
            body = server.answer({**line["body"], "model": model})
            request = f"vllm-batch-{uuid.uuid4().hex}"
            response = {"status_code": 200, "request_id": request, "body": body}
            record = {"id": request, "custom_id": line["custom_id"], "response": response}
            out.write(json.dumps({**record, "error": None}) + "\n")
    target.with_name(target.name + ".part").replace(target)  # whole, or not there
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mnemoflow.testing.run_batch")
    parser.add_argument("-i", "--input-file", type=Path, required=True)
    parser.add_argument("-o", "--output-file", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--reply", default=None, help="fixed reply text (default: echo)")
    args = parser.parse_args(argv)
    n = drain(args.input_file, args.output_file, args.model, args.reply)
    where = os.environ.get("SLURM_JOB_ID")
    print(f"run_batch stand-in: {n} requests" + (f" in SLURM job {where}" if where else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
