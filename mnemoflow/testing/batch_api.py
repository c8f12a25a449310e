"""The test server's Batch API: ``/v1/files`` and ``/v1/batches`` in OpenAI's shapes.

A batch's input file is JSONL, one ``{"custom_id", "method", "url", "body"}`` a line; the batch
finishes ``delay`` seconds after it was created (checked when it is retrieved, so a test never
waits on a timer), each line answered by the server's own chat completion. Its output file holds
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`` lines (the
format ``vllm run-batch`` writes too), its error file the failed lines. Planned failures, for the
client's fallbacks: the first ``line_errors`` lines of every batch fail the first time their
``custom_id`` is submitted; the first ``expire`` batches expire, answering only the first half of
their lines (the rest: ``batch_expired`` in the error file). ``created`` counts the batches.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

#: A chat completion body for a request body (the server's own reply).
Answer = Callable[[dict[str, Any]], dict[str, Any]]


class BatchAPI:
    """Files and batches of one test server (in memory)."""

    def __init__(self, answer: Answer, delay: float = 0.0, line_errors: int = 0, expire: int = 0):
        self.answer = answer
        self.delay = delay
        self.line_errors = line_errors
        self.expire = expire
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()  # custom_id -> times submitted in a batch
        self.created = 0
        self._ids = itertools.count(1)

    def routes(self, app: web.Application, prefix: str) -> None:
        app.router.add_post(f"{prefix}/v1/files", self._upload)
        app.router.add_get(f"{prefix}/v1/files/{{file_id}}", self._file)
        app.router.add_get(f"{prefix}/v1/files/{{file_id}}/content", self._content)
        app.router.add_post(f"{prefix}/v1/batches", self._create)
        app.router.add_get(f"{prefix}/v1/batches/{{batch_id}}", self._retrieve)
        app.router.add_get(f"{prefix}/v1/batches", self._list)

    def _store(self, name: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
            "data": data,
        }
        return self._public_file(file_id)

    def _public_file(self, file_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.files[file_id].items() if k != "data"}

    async def _upload(self, request: web.Request) -> web.Response:
        fields: dict[str, Any] = {}
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            fields[part.name] = (part.filename, await part.read())
        name, data = fields.get("file", (None, b""))
        if fields.get("purpose", (None, b""))[1] != b"batch" or name is None:
            return _error(400, "purpose 'batch' and a file are required")
        return web.json_response(self._store(name, "batch", bytes(data)))

    async def _file(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.files:
            return _error(404, f"no file {file_id}")
        return web.json_response(self._public_file(file_id))

    async def _content(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.files:
            return _error(404, f"no file {file_id}")
        return web.Response(body=self.files[file_id]["data"], content_type="application/jsonl")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return _error(400, f"input_file_id {file_id!r} is not an uploaded file")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "endpoint must be /v1/chat/completions")
        lines = [json.loads(x) for x in self.files[file_id]["data"].splitlines() if x.strip()]
        self.created += 1
        batch_id = f"batch_{next(self._ids)}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": file_id,
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "metadata": body.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "_ready": time.monotonic() + self.delay,
            "_expires": self.created <= self.expire,
        }
        return web.json_response(self._public_batch(batch_id))

    def _public_batch(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["batch_id"]
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"no batch {batch_id}")
        if batch["status"] == "in_progress" and time.monotonic() >= batch["_ready"]:
            self._finish(batch)
        return web.json_response(self._public_batch(batch_id))

    async def _list(self, request: web.Request) -> web.Response:
        """The batches newest first, ``limit`` a page after the id ``after`` (cursor paging)."""
        ids = list(reversed(self.batches))
        after = request.query.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        limit = int(request.query.get("limit", "20"))
        page = [self._public_batch(batch_id) for batch_id in ids[:limit]]
        last = page[-1]["id"] if page else None
        body = {"object": "list", "data": page, "has_more": len(ids) > limit, "last_id": last}
        return web.json_response(body)

    def _finish(self, batch: dict[str, Any]) -> None:
        data = self.files[batch["input_file_id"]]["data"]
        lines = [json.loads(x) for x in data.splitlines() if x.strip()]
        answered = len(lines) - len(lines) // 2 if batch["_expires"] else len(lines)
        out, err = [], []
        for n, line in enumerate(lines):
            custom_id = line["custom_id"]
            record = {"id": f"batch_req_{next(self._ids)}", "custom_id": custom_id}
            first = self.submitted[custom_id] == 0
            self.submitted[custom_id] += 1
            if n >= answered:
                error = {"code": "batch_expired", "message": "the batch expired first"}
                err.append({**record, "response": None, "error": error})
            elif n < self.line_errors and first:
                body = {"error": {"message": "planned line error", "type": "server_error"}}
                response = {"status_code": 500, "request_id": record["id"], "body": body}
                err.append({**record, "response": response, "error": None})
            else:
                response = {"status_code": 200, "request_id": record["id"]}
                out.append({**record, "response": {**response, "body": self.answer(line["body"])}})
        counts = batch["request_counts"]
        counts["completed"], counts["failed"] = len(out), len(err)
        batch["status"] = "expired" if batch["_expires"] else "completed"
        if out:
            batch["output_file_id"] = self._store("output.jsonl", "batch_output", _jsonl(out))["id"]
        if err:
            batch["error_file_id"] = self._store("errors.jsonl", "batch_output", _jsonl(err))["id"]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def _error(status: int, message: str) -> web.Response:
    payload = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return web.json_response(payload, status=status)
