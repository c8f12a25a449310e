"""Progress bars for long rules: items done / total, cache hits, calls per second and ETA.

A rule that answers or judges thousands of questions should say how far it is and whether the
response cache is doing its job. On a terminal that is an ordinary tqdm bar. In a log file (every
Snakemake rule sends stderr to its ``log:``, so stderr is not a TTY there) or on CI, a redrawn bar
would write one line per item (tqdm's carriage returns become line breaks in a log viewer); there we
print one plain line every ``QUIET_INTERVAL_S`` seconds instead, and one final line.

Set ``MNEMOFLOW_PROGRESS=off`` to silence the bars entirely (``TQDM_DISABLE=1`` works as well).

Usage::

    with progress(len(questions), "answer locomo/bm25") as bar:
        for question in questions:
            reply = await gateway.chat(request)
            bar.update(cache_hit=reply.cache_hit)

or, for concurrent calls, :func:`gather` awaits coroutines with a bar and keeps their order.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import IO, Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: Seconds between two lines when the output is a log file or CI (a bar redraws at most this often).
QUIET_INTERVAL_S = 10.0
#: Seconds between two redraws on a terminal.
TTY_INTERVAL_S = 0.2

_TTY_FORMAT = (
    "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
    "[{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)
_LOG_FORMAT = (
    "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%) elapsed {elapsed}, ETA {remaining}{postfix}"
)


def is_quiet(stream: IO[str] | None = None, environ: dict[str, str] | None = None) -> bool:
    """True when progress goes to a log or CI, where a redrawn bar would spam one line per item."""
    environ = os.environ if environ is None else environ
    if environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like objects without isatty
        return True


def is_disabled(environ: dict[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get("MNEMOFLOW_PROGRESS", "").strip().lower() in {"0", "off", "false", "no"}


class _LineWriter:
    """Turns tqdm's carriage-return redraws into whole lines, so a log gets one line per refresh."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.last = ""

    def write(self, text: str) -> None:
        text = text.replace("\r", "").rstrip()
        if text and text != self.last:  # tqdm's close repeats the last state
            self.stream.write(text + "\n")
            self.last = text

    def flush(self) -> None:
        self.stream.flush()


class Progress:
    """A tqdm bar that also counts response-cache hits.

    ``unit`` defaults to "call": the rate tqdm shows is then calls per second, hits included; the
    postfix gives the hit count and share so a slow rate with few hits reads as a slow endpoint.
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        *,
        unit: str = "call",
        file: IO[str] | None = None,
        quiet: bool | None = None,
        disable: bool | None = None,
        mininterval: float | None = None,
    ):
        stream = sys.stderr if file is None else file
        self.quiet = is_quiet(stream) if quiet is None else quiet
        self.hits = 0
        self.done = 0
        self.unit = unit
        if mininterval is None:
            mininterval = QUIET_INTERVAL_S if self.quiet else TTY_INTERVAL_S
        self._bar = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            file=_LineWriter(stream) if self.quiet else stream,
            mininterval=mininterval,
            # maxinterval drives tqdm's monitor thread, which would lower miniters below what
            # the log cadence needs; a high value keeps the cadence at ``mininterval``.
            maxinterval=max(mininterval, 10.0) * 6,
            bar_format=_LOG_FORMAT if self.quiet else _TTY_FORMAT,
            dynamic_ncols=not self.quiet,
            disable=is_disabled() if disable is None else disable,
            leave=True,
        )
        self._bar.set_postfix_str(self._postfix(), refresh=False)

    def _postfix(self) -> str:
        share = f" ({100 * self.hits / self.done:.0f}%)" if self.done else ""
        hits = f"cache hits {self.hits}{share}"
        if not self.quiet:
            return hits  # the terminal format shows tqdm's own (smoothed) rate
        rate = self.rate
        # A log line gives the average rate since the start, which is what an ETA rests on.
        return f"{rate:.2f} {self.unit}s/s, {hits}" if rate is not None else hits

    def update(self, n: int = 1, *, cache_hit: bool | int | None = None) -> None:
        """Count ``n`` finished items; ``cache_hit`` is True/False for all of them, or a count."""
        if cache_hit is True:
            hits = n
        elif cache_hit is False or cache_hit is None:
            hits = 0
        else:
            hits = int(cache_hit)
            if not 0 <= hits <= n:
                raise ValueError(f"cache_hit count {hits} is outside 0..{n}")
        self.done += n
        self.hits += hits
        self._bar.set_postfix_str(self._postfix(), refresh=False)
        self._bar.update(n)

    @property
    def rate(self) -> float | None:
        """Items per second so far (None before the first item)."""
        elapsed = self._bar.format_dict["elapsed"]
        return self.done / elapsed if self.done and elapsed > 0 else None

    def close(self) -> None:
        """Print the final line (tqdm does, with the overall rate) and release the bar."""
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int | None, desc: str, **kwargs: Any) -> Progress:
    """A :class:`Progress` bar for ``total`` items; see the module docstring."""
    return Progress(total, desc, **kwargs)


def _default_hit(result: Any) -> bool:
    return bool(getattr(result, "cache_hit", False))


async def gather(
    awaitables: Iterable[Awaitable[T]],
    desc: str,
    *,
    cache_hit: Callable[[T], bool | int] = _default_hit,
    **kwargs: Any,
) -> list[T]:
    """Like ``asyncio.gather``, with a bar that advances as each awaitable finishes.

    Results come back in input order. ``cache_hit(result)`` says whether a result came from the
    cache; the default reads a ``cache_hit`` attribute, as the gateway's ``Reply`` has.
    """
    tasks = [asyncio.ensure_future(item) for item in awaitables]
    with progress(len(tasks), desc, **kwargs) as bar:
        try:
            for finished in asyncio.as_completed(tasks):
                result = await finished
                bar.update(cache_hit=cache_hit(result))
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
    return [task.result() for task in tasks]
