"""The shared base of a real product's adapter: what every adapter does the same way.

An adapter is one class on :class:`Product` (a store kept in memory), :class:`FolderProduct` (a
private folder, snapshotted as one gzip'd tar beside a JSON state file) or
:class:`ThreadProduct` (a folder product whose synchronous code runs in a thread of its own, its
model calls hopping back to the job's event loop). The base owns the pinned install check, the
call counters, the failure a product's catch-all would hide, the snapshot layout and the thread;
the class says what is its own: the product's modules and patches, the state it saves, and its
offline twin (``offline``, ``offline_tasks``: the ``llm/offline`` module answering its model
calls offline and the tasks it answers, checked against the handler table by a test).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import tarfile
import tempfile
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import MemoryItem, MemorySystem, Message
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.products import INSTALL_HINT

_patch_lock = threading.Lock()
_patched: set[str] = set()
_owners = threading.local()  # the memory whose product runs in this thread: .owner


def patch_once(key: str, patch: Callable[..., None], *args: Any) -> None:
    """Run ``patch(*args)`` once per process (a product's modules are patched in place)."""
    with _patch_lock:
        if key not in _patched:
            patch(*args)
            _patched.add(key)


def conversation_time(time: str) -> datetime | None:
    """A conversation time as a datetime when the data's time is ISO, else ``None``: a product's
    clock is the conversation's, never the wall clock."""
    try:
        return datetime.fromisoformat(time.strip())
    except ValueError:
        return None


def formatted_time(time: str, time_format: str) -> str:
    """A conversation time in a product's own format when it is ISO, else the data's own
    string."""
    parsed = conversation_time(time)
    return parsed.strftime(time_format) if parsed is not None else time.strip()


#: The role every product's model calls are made as (its embeddings: ``embedder``).
WRITER = "memory_writer"


class Product(MemorySystem):
    """A real product behind the MemorySystem interface; subclasses set the class attributes
    and implement ``_modules`` (import the product, pinned, and patch it once), ``_write``
    (store the messages that have content) and ``_search`` (rank what is stored)."""

    defaults, params_schema = declare_params(top_k=Param(10, "integer", minimum=1))
    ingest_params: ClassVar[frozenset[str] | None] = frozenset()
    ingest_roles: ClassVar[tuple[str, ...]] = (WRITER, "embedder")
    #: A product's search embeds the query only, unless it says otherwise.
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)

    #: The product's name in messages ("A-Mem").
    product: ClassVar[str] = ""
    #: The distribution and version the adapter is written against, and what installs it.
    distribution: ClassVar[str] = ""
    version: ClassVar[str] = ""
    install: ClassVar[str] = INSTALL_HINT
    #: Its offline twin: the ``llm/offline`` module that answers its model calls offline, and
    #: the tasks it answers (a task only a real endpoint gets is not listed).
    offline: ClassVar[str] = ""
    offline_tasks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self._modules()  # a missing install fails here, in one line, before any work
        self._lock = asyncio.Lock()
        self.failure: BaseException | None = None
        self.writer_calls = 0
        self.parse_failures = 0
        self.tokens_written = 0
        self.fresh_state()

    def fresh_state(self) -> None:
        """Set the adapter's own bookkeeping of an empty memory (ids, clock, pending batch): a
        product states it here rather than repeating the constructor."""

    def _modules(self) -> Any:
        """Import the product (``require_all(self)`` first: every package of ``requires`` at its
        pinned version, else one line naming the install command) and patch it once."""
        raise NotImplementedError

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        kept = [m for m in messages if m.content.strip()]
        async with self._lock:
            await self._write(kept)

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        async with self._lock:
            return await self._search(query, k or self.params["top_k"])

    async def _write(self, messages: list[Message]) -> None:
        """Store ``messages`` (each has content), under the memory's lock."""
        raise NotImplementedError

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        """The ``k`` best items for ``query`` (none when nothing is stored), under the lock."""
        raise NotImplementedError

    def writer_request(
        self, task: str, messages: list[dict[str, Any]], fields: dict[str, Any], **extra: Any
    ) -> ChatRequest:
        """A model call of the product, tagged ``task`` with the structured inputs the offline
        twin reads (``fields``); ``extra``: response format, tools, tool choice."""
        return ChatRequest(role=WRITER, task=task, messages=messages, fields=fields, **extra)

    @classmethod
    def offline_handlers(cls) -> dict[str, Callable[..., Any]]:
        """The handler of each of ``offline_tasks``, each defined in ``offline``; a task the
        twin does not answer is an error naming it."""
        from mnemoflow.llm.offline import HANDLERS

        importlib.import_module(cls.offline)
        out = {}
        for task in cls.offline_tasks:
            handler = HANDLERS.get(task)
            if handler is None or handler.__module__ != cls.offline:
                raise LookupError(f"systems type {cls.name}: {cls.offline} answers no {task!r}")
            out[task] = handler
        return out

    def call_site_unknown(self) -> RuntimeError:
        return RuntimeError(
            f"{self.product} made a model call from a call site the mnemoflow bridge does not "
            f"know ({self.distribution} {self.version} expected); refusing to guess its task"
        )

    @contextmanager
    def recording(self) -> Iterator[None]:
        """A product catches every exception of its model calls: the gateway's is kept on the
        memory and raised when the product returns, never a silently degraded memory."""
        try:
            yield
        except BaseException as exc:
            self.failure = self.failure or exc
            raise

    def counted(self, reply: Any) -> Any:
        """Count a writer call and whether its reply parsed; the reply."""
        self.writer_calls += 1
        if not reply.parse_ok:
            self.parse_failures += 1
        return reply

    def writes(self) -> dict[str, int]:
        """The stats every writing product reports."""
        return {
            "tokens_written": self.tokens_written,
            "writer_calls": self.writer_calls,
            "parse_failures": self.parse_failures,
        }

    def check_version(self, state: dict[str, Any], path: Path) -> None:
        if state["version"] != self.version:
            article = "an" if self.distribution[:1] in "aeiou" else "a"
            raise ValueError(
                f"{path}: version: {article} {self.distribution} {state['version']} snapshot, "
                f"this is {self.version}"
            )


class Bridge:
    """What a product holds as its model client: a weak reference to its memory (the product
    must not keep the system alive)."""

    def __init__(self, owner: Product):
        self._owner = weakref.ref(owner)
        self._product = owner.product

    @property
    def owner(self) -> Any:
        owner = self._owner()
        if owner is None:
            raise RuntimeError(f"{self._product} called a bridge whose memory system is gone")
        return owner


class FolderProduct(Product):
    """A product whose store is a private folder: ``save`` writes ``state_file`` (the adapter's
    own state, ``state_keys``) and the folder as one gzip'd tar ``snapshot``; ``load`` unpacks
    it into a fresh folder."""

    snapshot: ClassVar[str] = ""
    state_file: ClassVar[str] = ""
    state_keys: ClassVar[tuple[str, ...]] = ()
    folder_prefix: ClassVar[str] = ""

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self._folder: tempfile.TemporaryDirectory | None = None
        self._memory: Any = None
        self._finalizer: weakref.finalize | None = None

    def _workdir(self) -> Path:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix=self.folder_prefix)
        return Path(self._folder.name)

    def state(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.state_keys}

    def restore(self, state: dict[str, Any]) -> None:
        for key in self.state_keys:
            setattr(self, key, state[key])

    def _checkpoint(self) -> None:
        """Write what the open store holds only in memory or a log into its files."""

    @staticmethod
    def _archived(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return info

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        state = {"version": self.version, **self.state()}
        text = json.dumps(state, sort_keys=True)
        (directory / self.state_file).write_text(text, encoding="utf-8")
        if self._folder is None:
            return  # nothing written yet: an empty memory
        self._checkpoint()
        with tarfile.open(directory / self.snapshot, "w:gz") as archive:
            for path in sorted(Path(self._folder.name).iterdir()):
                archive.add(path, arcname=path.name, filter=self._archived)

    def load(self, directory: Path) -> None:
        directory = Path(directory)
        state = json.loads((directory / self.state_file).read_text(encoding="utf-8"))
        self.check_version(state, directory / self.state_file)
        self._close()
        self.restore(state)
        if (directory / self.snapshot).exists():
            with tarfile.open(directory / self.snapshot, "r:gz") as archive:
                archive.extractall(self._workdir(), filter="data")

    def _close(self) -> None:
        self._memory = None
        if self._finalizer is not None:
            self._finalizer()  # closes the store (and its thread), once
            self._finalizer = None
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder.name, ignore_errors=True)


class ThreadProduct(FolderProduct):
    """A synchronous product run in its memory's own thread, its model calls on the job's loop.

    Each memory runs its product in a one-thread executor of its own (never the loop's default
    executor, which a local embedding model may need meanwhile, so episodes running at once
    cannot starve each other), marks itself as that thread's owner (its pinned clock, ids and
    bridges find their memory through :meth:`running`), and its bridges run gateway coroutines
    back on the job's event loop (:meth:`call`). A failure a bridge recorded meanwhile is raised
    when the product returns. Subclasses implement ``_construct(folder)``.
    """

    thread_name: ClassVar[str] = "product"

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def running(cls) -> Any:
        """The memory whose product runs in this thread (its pinned clock, ids, embedder)."""
        owner = getattr(_owners, "owner", None)
        if not isinstance(owner, cls):
            raise RuntimeError(
                f"{cls.product} ran outside the mnemoflow adapter (no pinned clock, ids or "
                "model for it)"
            )
        return owner

    def _construct(self, folder: Path) -> Any:
        raise NotImplementedError

    async def _open(self) -> Any:
        self._loop = asyncio.get_running_loop()
        if self._memory is None:
            self._memory = await self._in_thread(self._construct, self._workdir())
            self._finalizer = self._finalize()
        return self._memory

    def _finalize(self) -> weakref.finalize:
        """Release the thread (a subclass: its store too) with this instance, or at exit."""
        return weakref.finalize(self, _shut_thread, self._executor)

    def _close(self) -> None:
        if self._finalizer is not None:
            self._executor = None  # the finalizer shuts it: the next open starts a thread
        super()._close()

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in this memory's thread, as its owner; a failure a bridge
        recorded meanwhile is raised."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.thread_name)
        self._loop = asyncio.get_running_loop()

        def run() -> Any:
            _owners.owner = self
            try:
                return fn(*args, **kwargs)
            finally:
                _owners.owner = None

        try:
            result = await self._loop.run_in_executor(self._executor, run)
        finally:
            failure, self.failure = self.failure, None
        if failure is not None:
            raise failure
        return result

    def call(self, coroutine: Coroutine) -> Any:
        """Run a gateway coroutine on the job's event loop from the product's thread."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def _shut_thread(executor: ThreadPoolExecutor | None) -> None:
    if executor is not None:
        executor.shutdown(wait=False)
