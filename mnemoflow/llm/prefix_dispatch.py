"""Prefix-cache-aware dispatch: the order a role's pending requests are sent to its endpoint in.

vLLM and SGLang serve a prompt's leading blocks from their KV cache when an earlier request
*completed* with the same prefix, and evict least recently used blocks. A job sends many
requests that share long prefixes (one conversation read by many questions, one instruction
block, one growing history), but in the order the job produces them: requests of one prefix go
out together, all before any has filled the cache, and requests of many prefixes interleave,
each evicting the others from a bounded cache. The :class:`PrefixDispatcher` (one per role, on
when ``models.<role>.prefix_dispatch`` is true) holds a request back until it is its turn:

- a prompt is cut into blocks of :data:`BLOCK_CHARS` characters, each named by a hash chained
  over the blocks before it (two prompts share a block only when they share everything before
  it); the prompt itself is sent unchanged;
- a request is *held* while a request in flight shares at least :data:`MIN_GAIN` more blocks
  with it than the completed requests did: it is released once that one has completed (and the
  server's cache holds their prefix);
- of the others, a request whose prefix completed goes first (the longest completed prefix
  first, then the most recently completed), so one prefix's requests go out one after another
  while the server still holds it; then a *leader*, a request that shares at least
  :data:`MIN_GAIN` more blocks with other pending requests than completed requests did: the
  longest shared prefix first, then the most requests, and one leader at a time;
- never more than ``limit`` requests in flight; ties go by the cache key, so the
  order depends on the requests, not on when each arrived within a scheduling round (requests
  that arrive within :data:`SETTLE_TICKS` event-loop turns of each other are ordered together).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

#: Characters per block of a prompt (about 64 tokens of English): coarser than a server's
#: blocks, so that a long prompt's chain stays short to keep and to compare.
BLOCK_CHARS = 256
#: Blocks a request must gain by waiting (or a leader must offer) to be worth ordering for.
MIN_GAIN = 1
#: Event-loop turns a round waits after the first arrival, so that requests a job starts
#: together (``asyncio.gather``) are ordered together.
SETTLE_TICKS = 3
#: Completed blocks remembered (least recently completed forgotten first).
WARM_BLOCKS = 1_000_000


def prompt_chain(messages: list[dict[str, Any]], block_chars: int = BLOCK_CHARS) -> tuple[str, ...]:
    """The chained hashes of the whole blocks of the prompt's text (every message in order, its
    role and content as sent)."""
    text = prompt_text(messages)
    chain, previous = [], b""
    for start in range(0, len(text) - len(text) % block_chars, block_chars):
        digest = hashlib.blake2b(previous, digest_size=12)
        digest.update(text[start : start + block_chars].encode("utf-8"))
        previous = digest.digest()
        chain.append(sys.intern(previous.hex()))  # one string per block, however many prompts
    return tuple(chain)


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """What the chain is cut from: every message in order, its role and content as sent."""
    return "".join(
        json.dumps(m, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for m in messages
    )


def shared_fraction(messages: list[dict[str, Any]], seen: set[str]) -> float:
    """The share of a prompt's text whose blocks an earlier prompt of ``seen`` (the blocks sent
    so far, updated here) already sent: what an unbounded prefix cache would serve (a plan's
    estimate of the provider's cache)."""
    text = prompt_text(messages)
    chain = prompt_chain(messages)
    served = depth(chain, seen.__contains__)
    seen.update(chain)
    return served * BLOCK_CHARS / len(text) if text else 0.0


def depth(chain: tuple[str, ...], present: Callable[[str], bool]) -> int:
    """Leading blocks of ``chain`` for which ``present`` holds (it holds for a prefix of every
    chain: whatever holds of a block holds of the blocks before it)."""
    low, high = 0, len(chain)
    while low < high:
        mid = (low + high + 1) // 2
        if present(chain[mid - 1]):
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(eq=False)
class _Entry:
    chain: tuple[str, ...]
    key: str
    released: asyncio.Future[None]
    leader: bool = False
    order: tuple[Any, ...] = field(default=())
    #: held behind a request in flight, or a leader behind the leader in flight: skipped until
    #: a request whose prompt holds the block it waits on, or that leader, ends
    waiting: bool = False
    warm: int = 0  # leading blocks completed when last looked at


class PrefixDispatcher:
    """Releases one role's requests in prefix-cache-friendly order, ``limit`` in flight."""

    def __init__(self, limit: int, min_gain: int = MIN_GAIN, block_chars: int = BLOCK_CHARS):
        if limit < 1:
            raise ValueError(f"prefix dispatch: limit must be >= 1, got {limit}")
        self.limit = limit
        self.min_gain = min_gain
        self.block_chars = block_chars
        self._pending: dict[_Entry, None] = {}  # in arrival order
        self._inflight: dict[_Entry, None] = {}
        self._pending_blocks: Counter[str] = Counter()
        self._shared: set[str] = set()  # blocks of two or more pending requests
        #: block -> the waiting requests whose first block not yet completed it is
        self._waiting: dict[str, list[_Entry]] = {}
        self._parked: list[_Entry] = []  # leaders set aside (see _best)
        self._inflight_blocks: Counter[str] = Counter()
        self._warm: OrderedDict[str, int] = OrderedDict()  # block -> completion number
        self._completed = 0
        self._round: asyncio.Task[None] | None = None
        #: the keys in the order they were released (for tests and benches)
        self.released: list[str] = []
        self.max_inflight = 0

    async def send(
        self, messages: list[dict[str, Any]], key: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """``call()`` once this request's turn has come; its prompt is ``messages``."""
        loop = asyncio.get_running_loop()
        entry = _Entry(prompt_chain(messages, self.block_chars), key, loop.create_future())
        self._pending[entry] = None
        self._pending_blocks.update(entry.chain)
        for block in entry.chain:
            if self._pending_blocks[block] == 2:
                self._shared.add(block)
        self._schedule()
        try:
            await entry.released
        except BaseException:
            if entry in self._pending:
                self._drop_pending(entry)
            else:
                self._finish(entry, completed=False)
            raise
        completed = False
        try:
            result = await call()
            completed = True
            return result
        finally:
            self._finish(entry, completed)

    # ---- rounds ------------------------------------------------------------------------------

    def _schedule(self) -> None:
        if self._round is None or self._round.done():
            self._round = asyncio.get_running_loop().create_task(self._settle_then_release())

    async def _settle_then_release(self) -> None:
        for _ in range(SETTLE_TICKS):
            await asyncio.sleep(0)
        self._release()

    def _release(self) -> None:
        """Release the best eligible requests while there is room in flight."""
        while self._pending and len(self._inflight) < self.limit:
            best = self._best()
            if best is None:
                return
            self._drop_pending(best)
            self._inflight[best] = None
            self._inflight_blocks.update(best.chain)
            self.released.append(best.key)
            self.max_inflight = max(self.max_inflight, len(self._inflight))
            if not best.released.done():
                best.released.set_result(None)

    def _best(self) -> _Entry | None:
        best, leaders = self._scan()
        if best is not None and not best.leader:
            for entry in leaders:  # not wanted while a completed prefix has requests to go
                self._park(entry)
        elif self._parked:  # no such request: every leader is a candidate again
            self._unpark()
            best, _ = self._scan()
        return best

    def _scan(self) -> tuple[_Entry | None, list[_Entry]]:
        """The best pending request not waiting, and the leaders among the candidates."""
        leading = any(e.leader for e in self._inflight)
        best: _Entry | None = None
        leaders: list[_Entry] = []
        warm_of, ahead_of = self._warm.__contains__, self._inflight_blocks.__contains__
        shared_of = self._shared.__contains__
        for entry in self._pending:
            if entry.waiting:
                continue
            warm = depth(entry.chain, warm_of)
            ahead = depth(entry.chain, ahead_of)
            if ahead - warm >= self.min_gain:
                # a request in flight fills the cache with more of this prompt: nothing changes
                # that until a request holding its next block ends (_finish)
                self._wait(entry, warm)
                continue
            shared = depth(entry.chain, shared_of)
            entry.leader = shared - warm >= self.min_gain
            entry.warm = warm
            if entry.leader:
                if leading:
                    self._park(entry)
                    continue
                leaders.append(entry)
                group = self._pending_blocks[entry.chain[shared - 1]]
                entry.order = (1, -shared, -group, entry.key)
            else:
                recent = self._warm[entry.chain[warm - 1]] if warm else -1
                entry.order = (0, -warm, -recent, entry.key)
            if best is None or entry.order < best.order:
                best = entry
        return best, leaders

    def _park(self, entry: _Entry) -> None:
        """A leader waits for the leader in flight, or for the requests of completed prefixes
        to have gone; so does it for a request holding its next block to end."""
        self._wait(entry, entry.warm)
        self._parked.append(entry)

    def _unpark(self) -> None:
        for entry in self._parked:
            entry.waiting = False
        self._parked.clear()

    def _wait(self, entry: _Entry, warm: int) -> None:
        entry.waiting = True
        self._waiting.setdefault(entry.chain[warm], []).append(entry)

    def _drop_pending(self, entry: _Entry) -> None:
        del self._pending[entry]
        self._pending_blocks.subtract(entry.chain)
        for block in entry.chain:
            left = self._pending_blocks[block]
            if left < 2:
                self._shared.discard(block)
                if left <= 0:
                    del self._pending_blocks[block]

    def _finish(self, entry: _Entry, completed: bool) -> None:
        """A released request ended; a completed one's prefix is now in the server's cache."""
        if entry not in self._inflight:
            return
        del self._inflight[entry]
        for block in entry.chain:  # what waited on this prompt's blocks is looked at again
            for waiting in self._waiting.pop(block, ()):
                waiting.waiting = False
        if entry.leader:
            self._unpark()
        self._inflight_blocks.subtract(entry.chain)
        for block in entry.chain:
            if self._inflight_blocks[block] <= 0:
                del self._inflight_blocks[block]
        if completed:
            self._completed += 1
            for block in reversed(entry.chain):  # the head is the most recent, as a server has it
                self._warm[block] = self._completed
                self._warm.move_to_end(block)
            while len(self._warm) > WARM_BLOCKS:
                self._warm.popitem(last=False)
        if self._pending:
            self._schedule()
