"""A synchronous product run in its memory's own thread, its model calls on the job's loop.

A-Mem and MemoryOS are synchronous: they block their thread until a model answers. Each memory
runs its product in a one-thread executor of its own (never the loop's default executor, which a
local embedding model may need meanwhile, so episodes running at once cannot starve each other),
marks itself as that thread's owner (the bridges find their memory through it), and its bridges
run gateway coroutines back on the job's event loop (:meth:`ProductThread.call`). Products catch
every exception of their model calls; a bridge records the gateway's failure on the memory
(``failure``) and it is raised when the product returns, so a failed call is never a silently
degraded memory.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class ProductThread:
    """Mixin of a product memory; set ``owners`` (the module's thread-local) and ``thread_name``,
    and ``_executor``, ``_loop`` and ``failure`` to ``None`` in ``__init__``."""

    owners: threading.local
    thread_name = "product"
    _executor: ThreadPoolExecutor | None
    _loop: asyncio.AbstractEventLoop | None
    failure: BaseException | None

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in this memory's thread, as its owner; a failure a bridge
        recorded meanwhile is raised."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.thread_name)
        self._loop = asyncio.get_running_loop()
        owners = self.owners

        def run() -> Any:
            owners.owner = self
            try:
                return fn(*args, **kwargs)
            finally:
                owners.owner = None

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
