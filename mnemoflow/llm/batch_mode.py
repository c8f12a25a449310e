"""Batch-API mode: a job's cache misses of a role sent as one provider batch, keyed by the cache.

A job in Batch-API mode runs its work in *passes* (:meth:`Gateway.batched`): a pass asks every
request it can; a request of a batch role that misses the response cache is not sent but
collected (its caller gets a pending, failed reply and the pass's tables are thrown away). The
collected requests are written as Batch-API JSONL whose ``custom_id`` is the request's cache key,
uploaded (``/v1/files``, purpose ``batch``) and submitted (``/v1/batches``), or drained by the
endpoint's ``run_batch`` command (``vllm run-batch`` reads and writes the same JSONL). Each
batch's ids are written beside the cache *before* the job waits, so a killed or timed-out job
that runs again finds the batch and polls it instead of submitting again. Finished replies go into
the cache, and the next pass runs on them; a request that only a reply makes possible (a re-ask
of an unparseable reply) goes into the next batch. The pass that collects nothing is the job's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shlex
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mnemoflow.errors import ConfigError
from mnemoflow.llm.cache import ResponseCache
from mnemoflow.llm.types import ChatRequest, Completion, EndpointError, EndpointSpec

log = logging.getLogger(__name__)

#: OpenAI's limits of one batch input file.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024**2
#: Polls back off (doubling from ``batch_poll_s``) to this many seconds between polls.
MAX_POLL_S = 60.0
#: Batches a request may go through before the job gives up on it (``batch_fallback: resubmit``).
MAX_SUBMITS = 3
#: A submission begun and not yet recorded as made (its record's status), and the metadata key
#: naming it on the provider's batch (how a rerun finds the batch again).
SUBMITTING = "submitting"
SUBMISSION_KEY = "mnemoflow_submission"
#: The failure of a reply whose request waits for its batch (the pass's tables are discarded).
PENDING = "pending in a Batch-API batch"
#: Set (by ``mnemoflow batch submit``): a job submits its batch and stops instead of waiting.
SUBMIT_ONLY_ENV = "MNEMOFLOW_BATCH_SUBMIT"
#: A batch's states after which it changes no more.
FINAL = ("completed", "expired", "failed", "cancelled")


#: Saves a batch's record beside the cache (written before anything waits on it).
Save = Callable[[dict[str, Any]], None]
#: Drains a ``run_batch`` batch elsewhere than in the job (a SLURM job of its own,
#: :mod:`mnemoflow.jobs.run_batch`): its output file's bytes, or None to run it in the job.
DrainCommand = Callable[[EndpointSpec, dict[str, Any], Save], Awaitable[bytes | None]]


class Gateway(Protocol):
    """What Batch-API mode uses of the model gateway (:class:`mnemoflow.llm.gateway.Gateway`,
    which imports this module): the roles' specs, the response cache, where a ``run_batch``
    batch is drained, a role's backend for a request asked online, and the address a role's
    requests go to."""

    specs: dict[str, EndpointSpec]
    cache: ResponseCache
    drain_command: DrainCommand | None

    def backend(self, role: str) -> Any: ...

    def endpoint_url(self, role: str) -> str: ...


class BatchPending(Exception):
    """A batch role's request missed the cache in a collecting pass: it waits for the batch."""


@dataclass(frozen=True)
class Pending:
    """A collected request: its cache key (``custom_id``), the request and its body."""

    key: str
    request: ChatRequest
    body: dict[str, Any]


@dataclass
class Rounds:
    """One job's Batch-API state across its passes."""

    store: BatchStore
    pending: dict[str, Pending] = field(default_factory=dict)
    #: cache key -> (batch id, or None for a call made online, its completion): replies this
    #: job got, counted as calls (at batch prices for a batch) by the pass that uses them
    fresh: dict[str, tuple[str | None, Completion]] = field(default_factory=dict)
    counts: dict[str, Counter[str]] = field(default_factory=dict)  # role/task -> counters

    def count(self, pending: Pending, name: str, n: int = 1) -> None:
        key = f"{pending.request.role}/{pending.request.task}"
        self.counts.setdefault(key, Counter())[name] += n


def batch_line(key: str, body: dict[str, Any]) -> bytes:
    """One line of a batch input file."""
    line = {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return (json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def split_lines(
    lines: list[bytes], max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES
) -> list[list[bytes]]:
    """``lines`` in files of at most ``max_requests`` lines and ``max_bytes`` bytes each."""
    files: list[list[bytes]] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise ConfigError(f"a Batch-API request of {len(line)} bytes exceeds a file's limit")
        if not files or len(files[-1]) >= max_requests or size + len(line) > max_bytes:
            files.append([])
            size = 0
        files[-1].append(line)
        size += len(line)
    return files


def read_output(data: bytes) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """An output (or error) file: custom_id -> completion body of each answered line, and
    custom_id -> why for each failed one."""
    answered: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            custom_id = line["custom_id"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise EndpointError(f"Batch-API output line {number}: no JSON with custom_id") from None
        response = line.get("response") or {}
        if line.get("error") or response.get("status_code") != 200:
            error = line.get("error") or (response.get("body") or {}).get("error") or {}
            failed[custom_id] = str(error.get("code") or error.get("message") or "failed")
        else:
            answered[custom_id] = response["body"]
    return answered, failed


class BatchStore:
    """The records of submitted batches, one JSON file each, beside the response cache."""

    def __init__(self, directory: Path):
        self.directory = directory

    @classmethod
    def beside(cls, cache_directory: Path | None) -> BatchStore:
        if cache_directory is None:
            raise ConfigError(
                "Batch-API mode keeps its batch ids beside the response cache, and this job has "
                "none (config cache:)"
            )
        return cls(cache_directory.with_name(cache_directory.name + ".batches"))

    def save(self, record: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{_safe(record['id'])}.json"
        temporary = path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    def remove(self, record: dict[str, Any]) -> None:
        (self.directory / f"{_safe(record['id'])}.json").unlink(missing_ok=True)

    def records(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except FileNotFoundError:  # a submission's intent, removed once its record is made
                continue
        return found

    def outstanding(self, spec: EndpointSpec) -> list[dict[str, Any]]:
        """Submitted, not yet collected batches of ``spec``'s model and endpoint."""
        return [
            r
            for r in self.records()
            if r["status"] not in ("collected", SUBMITTING) and r["endpoint"] == endpoint_of(spec)
        ]

    def submitting(self, spec: EndpointSpec) -> list[dict[str, Any]]:
        """Submissions of ``spec``'s endpoint a job began and never recorded as made (it was
        killed between the provider creating the batch and the record being written)."""
        return [
            r
            for r in self.records()
            if r["status"] == SUBMITTING and r["endpoint"] == endpoint_of(spec)
        ]


def endpoint_of(spec: EndpointSpec) -> str:
    """What a record names its endpoint by: model and (redacted) address, or the command."""
    where = f"run_batch:{spec.run_batch}" if spec.run_batch else spec.base_url or ""
    return f"{spec.model}@{where}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class BatchClient:
    """The provider's Files and Batches API over aiohttp (the key read from its variable)."""

    def __init__(self, spec: EndpointSpec, url: str):
        self.url = url.rstrip("/")
        self.headers = {
            header: os.environ.get(variable, "")
            for header, variable in (spec.headers_env or {}).items()
        }
        key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        if spec.api_key_env and not key:
            raise ConfigError(
                f"environment variable {spec.api_key_env} (named by models.{spec.role}"
                ".api_key_env) is not set"
            )
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        import aiohttp

        async with aiohttp.ClientSession(headers=self.headers) as session:
            async with session.request(method, self.url + path, **kwargs) as response:
                data = await response.read()
                if response.status != 200:
                    text = data.decode("utf-8", "replace")[:300]
                    raise EndpointError(f"Batch API {method} {path}: HTTP {response.status} {text}")
                if response.content_type == "application/json":
                    return json.loads(data)
                return data

    async def upload(self, data: bytes, name: str) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename=name, content_type="application/jsonl")
        return (await self._call("POST", "/files", data=form))["id"]

    async def create(self, file_id: str, window: str, name: str) -> dict[str, Any]:
        body = {
            "input_file_id": file_id,
            "endpoint": "/v1/chat/completions",
            "completion_window": window,
            "metadata": {SUBMISSION_KEY: name},
        }
        return await self._call("POST", "/batches", json=body)

    async def find(self, name: str, known: set[str]) -> dict[str, Any] | None:
        """The newest batch created for submission ``name`` (its metadata) that no record
        holds yet, by listing the account's batches (newest first, a page of 100 at a time)."""
        after = None
        while True:
            query = {"limit": "100", **({"after": after} if after else {})}
            page = await self._call("GET", "/batches", params=query)
            for batch in page.get("data", []):
                made_for = (batch.get("metadata") or {}).get(SUBMISSION_KEY)
                if made_for == name and batch["id"] not in known:
                    return batch
            if not page.get("has_more") or not page.get("data"):
                return None
            after = page["data"][-1]["id"]

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/batches/{batch_id}")

    async def content(self, file_id: str) -> bytes:
        data = await self._call("GET", f"/files/{file_id}/content")
        return data if isinstance(data, bytes) else json.dumps(data).encode("utf-8")


async def drain(gateway: Gateway, rounds: Rounds) -> None:
    """Send every collected request of the pass; their replies go into the cache."""
    by_role: dict[str, dict[str, Pending]] = {}
    for key, pending in rounds.pending.items():
        by_role.setdefault(pending.request.role, {})[key] = pending
    rounds.pending = {}
    await asyncio.gather(*(_drain_role(gateway, rounds, todo) for todo in by_role.values()))


async def _drain_role(gateway: Gateway, rounds: Rounds, todo: dict[str, Pending]) -> None:
    from mnemoflow.llm.openai_backend import completion_of  # the client is loaded when used

    role = next(iter(todo.values())).request.role
    spec = gateway.specs[role]
    await adopt(gateway, rounds.store, spec)
    for submit in range(MAX_SUBMITS):
        outstanding = [
            r for r in rounds.store.outstanding(spec) if set(r["custom_ids"]) & set(todo)
        ]
        covered = {key for record in outstanding for key in record["custom_ids"]}
        new = [todo[key] for key in sorted(todo) if key not in covered]
        for lines in split_lines([batch_line(p.key, p.body) for p in new]):
            outstanding.append(await _submit(gateway, rounds, spec, lines))
        if os.environ.get(SUBMIT_ONLY_ENV) and not spec.run_batch:
            raise EndpointError(
                f"models.{role}: {len(todo)} requests wait in Batch-API batches "
                f"{', '.join(r['id'] for r in outstanding)} (submitted, not waited for: "
                "mnemoflow batch submit); `mnemoflow batch collect` when they are done, then run "
                "again"
            )
        done = await asyncio.gather(
            *(_collect(gateway, spec, r, rounds.store.save) for r in outstanding)
        )
        answered: set[str] = set()
        for record, (replies, failed) in zip(outstanding, done, strict=True):
            for key, body in replies.items():
                pending = todo.get(key)
                tools = pending is not None and pending.request.tools is not None
                completion = completion_of(body, spec, tools)
                gateway.cache.put(key, completion)
                if pending is not None:
                    rounds.fresh[key] = (record["id"], completion)
                    answered.add(key)
            for key in set(failed) & set(todo):
                rounds.count(todo[key], "batch_errors")
            rounds.store.save(record)  # its replies are in the cache: never collected again
        todo = {key: p for key, p in todo.items() if key not in answered}
        if not todo:
            return
        if spec.batch_fallback == "online":
            await asyncio.gather(*(_online(gateway, rounds, p) for p in todo.values()))
            return
        if submit + 1 < MAX_SUBMITS:
            for pending in todo.values():
                rounds.count(pending, "batch_resubmitted")
    raise EndpointError(
        f"models.{role}: {len(todo)} requests failed in {MAX_SUBMITS} Batch-API batches; "
        "batch_fallback: online asks them online"
    )


async def adopt(gateway: Gateway, store: BatchStore, spec: EndpointSpec) -> None:
    """Turn each submission a killed job began into the record of the batch the provider made
    for it, found by its name; one the provider never made is dropped (submitted anew)."""
    begun = store.submitting(spec)
    if not begun:
        return
    client = BatchClient(spec, gateway.endpoint_url(spec.role))
    known = {r["id"] for r in store.records()}
    for intent in begun:
        batch = await client.find(intent["name"], known)
        if batch is not None:
            record = {k: v for k, v in intent.items() if k != "name"}
            record.update(id=batch["id"], input_file_id=batch["input_file_id"], status="submitted")
            store.save(record)
            known.add(batch["id"])
            log.info("models.%s: adopted batch %s of an interrupted job", spec.role, batch["id"])
        store.remove(intent)


async def _online(gateway: Gateway, rounds: Rounds, pending: Pending) -> None:
    request, spec = pending.request, gateway.specs[pending.request.role]
    completion = await gateway.backend(request.role).complete(request, spec)
    gateway.cache.put(pending.key, completion)
    rounds.fresh[pending.key] = (None, completion)
    rounds.count(pending, "batch_online")


async def _submit(
    gateway: Gateway, rounds: Rounds, spec: EndpointSpec, lines: list[bytes]
) -> dict[str, Any]:
    """Submit one file of ``lines``; its record is written before anything waits on it."""
    data = b"".join(lines)
    custom_ids = [json.loads(line)["custom_id"] for line in lines]
    digest = hashlib.sha256(data).hexdigest()[:16]
    record: dict[str, Any] = {
        "role": spec.role,
        "model": spec.model,
        "endpoint": endpoint_of(spec),
        "custom_ids": custom_ids,
        "submitted_at": time.time(),
        "status": "submitted",
    }
    if spec.run_batch:
        folder = rounds.store.directory
        folder.mkdir(parents=True, exist_ok=True)
        record.update(id=f"run_batch-{digest}", input=str(folder / f"run_batch-{digest}.in.jsonl"))
        record["output"] = str(folder / f"run_batch-{digest}.out.jsonl")
        Path(record["input"]).write_bytes(data)
    else:
        # the intent is on disk before the provider creates anything: a job killed before its
        # record is written finds the batch again by this name (adopt), never submits twice
        name = f"mnemoflow-{digest}.jsonl"
        intent = {**record, "id": f"{SUBMITTING}-{digest}", "status": SUBMITTING, "name": name}
        rounds.store.save(intent)
        client = BatchClient(spec, gateway.endpoint_url(spec.role))
        file_id = await client.upload(data, name)
        batch = await client.create(file_id, spec.batch_window, name)
        record.update(id=batch["id"], input_file_id=file_id)
    rounds.store.save(record)
    if not spec.run_batch:
        rounds.store.remove(intent)
    log.info("models.%s: %d requests submitted as batch %s", spec.role, len(lines), record["id"])
    return record


async def _collect(
    gateway: Gateway, spec: EndpointSpec, record: dict[str, Any], save: Save
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Wait for one batch, then its answered and failed requests; the record is marked
    collected (a request it did not answer is failed)."""
    if spec.run_batch:
        elsewhere = gateway.drain_command
        data = await elsewhere(spec, record, save) if elsewhere is not None else None
        if data is None:
            data = await _run_command(spec, record)
    else:
        client = BatchClient(spec, gateway.endpoint_url(spec.role))
        batch = await _wait(client, spec, record)
        data = b""
        for name in ("output_file_id", "error_file_id"):
            if batch.get(name):
                data += await client.content(batch[name])
        record["final_status"] = batch["status"]
    answered, failed = read_output(data)
    for key in record["custom_ids"]:
        if key not in answered:
            failed.setdefault(key, record.get("final_status", "no reply"))
    record["status"] = "collected"
    record["collected_at"] = time.time()
    return answered, failed


async def _wait(client: BatchClient, spec: EndpointSpec, record: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    delay = spec.batch_poll_s
    while True:
        batch = await client.retrieve(record["id"])
        if batch["status"] in FINAL:
            return batch
        waited = time.monotonic() - started
        if waited >= spec.batch_max_wait_s:
            raise EndpointError(
                f"models.{spec.role}: Batch-API batch {record['id']} is {batch['status']} after "
                f"{waited:.0f} s (batch_max_wait_s); run the job again to go on polling it"
            )
        await asyncio.sleep(min(delay, spec.batch_max_wait_s - waited))
        delay = min(MAX_POLL_S, delay * 2)


def command_argv(command: str, record: dict[str, Any]) -> list[str]:
    """A ``run_batch`` command's words for one batch: its input and output files filled in."""
    return [
        part.replace("{input}", record["input"]).replace("{output}", record["output"])
        for part in shlex.split(command)
    ]


async def _run_command(spec: EndpointSpec, record: dict[str, Any]) -> bytes:
    """Drain a batch file with the endpoint's ``run_batch`` command in this job; its output
    file's bytes."""
    assert spec.run_batch is not None
    output = Path(record["output"])
    argv = command_argv(spec.run_batch, record)
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    said, _ = await process.communicate()
    if process.returncode != 0 or not output.is_file():
        tail = said.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise EndpointError(
            f"models.{spec.role}: run_batch exited with {process.returncode} and "
            f"{'no' if not output.is_file() else 'an'} output file: {tail[0][:200]}"
        )
    record["final_status"] = "completed"
    return output.read_bytes()


def claim_collected(gateway: Gateway, rounds: Rounds) -> list[dict[str, Any]]:
    """Batches ``mnemoflow batch collect`` put into the cache for a later job: their replies
    count as batch calls of the job that uses them (the records it returns, once it is done)."""
    claimed = []
    endpoints = {endpoint_of(spec) for spec in gateway.specs.values() if spec.batch}
    for record in rounds.store.records():
        if not record.get("uncounted") or record["endpoint"] not in endpoints:
            continue
        for key in record["custom_ids"]:
            completion = gateway.cache.get(key)
            if completion is not None:
                rounds.fresh[key] = (record["id"], completion)
        claimed.append(record)
    return claimed


async def collect_for_later(
    gateway: Gateway, store: BatchStore, wait: bool = False, store_replies: bool = True
) -> list[tuple[dict[str, Any], str]]:
    """``mnemoflow batch status`` / ``collect``: each outstanding batch of a batch role of
    ``gateway`` and its state; with ``store_replies``, a finished one's replies go into the
    cache (``wait``: polls it until it finishes) and its record is marked collected, to be
    counted by the job that uses them (:func:`claim_collected`)."""
    from mnemoflow.llm.openai_backend import completion_of

    found = []
    seen = set()  # a role that takes another's binding (the critic) shares its batches
    for spec in gateway.specs.values():
        if not spec.batch or spec.run_batch or endpoint_of(spec) in seen:
            continue
        seen.add(endpoint_of(spec))
        await adopt(gateway, store, spec)
        for record in store.outstanding(spec):
            client = BatchClient(spec, gateway.endpoint_url(spec.role))
            batch = await (_wait(client, spec, record) if wait else client.retrieve(record["id"]))
            found.append((record, batch["status"]))
            if batch["status"] not in FINAL or not store_replies:
                continue
            data = b""
            for name in ("output_file_id", "error_file_id"):
                if batch.get(name):
                    data += await client.content(batch[name])
            answered, _ = read_output(data)
            for key, body in answered.items():
                message = ((body.get("choices") or [{}])[0] or {}).get("message") or {}
                gateway.cache.put(key, completion_of(body, spec, bool(message.get("tool_calls"))))
            record.update(status="collected", uncounted=True, final_status=batch["status"])
            store.save(record)
    return found


def apply_counts(rounds: Rounds, entries: Any) -> None:
    """The counters of the job's batches (errors, resubmits, online asks) into a ledger's."""
    for key, counter in rounds.counts.items():
        entry = entries[key]
        for name, value in counter.items():
            setattr(entry, name, getattr(entry, name) + value)
