"""Gateway throughput against the local OpenAI-compatible server: ``python -m bench.gateway``.

Method (recorded in docs/performance.md): the test server runs in a *separate process* (so it does
not share the client's event loop or GIL) and answers every chat completion after a fixed latency
(50 ms by default). For each concurrency c the Gateway (openai backend, ``concurrency: c``, SQLite
response cache on, every prompt unique so every call misses the cache and reaches the server) sends
enough requests for about ``--seconds`` of ideal work; the rate is requests / wall-clock seconds
from the first submission to the last reply, and is compared with the ideal c / latency. A plain
sequential ``openai.OpenAI`` client is the baseline (ideal 1 / latency); a hand-written
``AsyncOpenAI`` + semaphore loop and a bare ``aiohttp`` loop (no openai package: the floor of what
any Python client costs on the machine) at the same concurrency are shown for comparison. Each
cell is the median of ``--runs`` runs; the server's counters confirm that every request was
answered exactly once and that in-flight requests never exceeded c. CPU per request (client
process, server process) and the load average are recorded too: on a shared machine they tell a
slow client from a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import openai

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest, EndpointSpec


@dataclass
class Row:
    client: str
    concurrency: int
    requests: int
    ideal: float
    runs: list[float] = field(default_factory=list)  # requests per second, one per run
    client_cpu_ms: list[float] = field(default_factory=list)  # CPU per request, client process
    server_cpu_ms: list[float] = field(default_factory=list)  # CPU per request, server process
    load: list[float] = field(default_factory=list)  # 1-minute load average after each run

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def ratio(self) -> float:
        return self.median / self.ideal


class ServerProcess:
    """The test server in a child process; the URL is read from its first line of output."""

    def __init__(
        self,
        latency: float,
        jitter: float = 0.0,
        reply: str | None = None,
        module: str = "mnemoflow.testing.openai_server",
        options: tuple[str, ...] = (),
    ):
        command = [sys.executable, "-m", module, *options]
        command += ["--latency", str(latency), "--jitter", str(jitter)]
        if reply is not None:
            command += ["--reply", reply]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("serving "):
            self.proc.kill()
            raise RuntimeError(f"bench: test server did not start (said {line!r})")
        self.base_url = line.split()[1]
        self._root = self.base_url.removesuffix("/v1")

    def cpu_seconds(self) -> float:
        """User + system CPU of the server process so far (Linux /proc)."""
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self._root}/mnemoflow/stats") as reply:
            return json.load(reply)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self._root}/mnemoflow/reset", method="POST", data=b"")
        urllib.request.urlopen(request).close()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _messages(tag: str, i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a helpful assistant with a long-term memory."},
        {"role": "user", "content": f"Question {tag}-{i}: where did I say I keep my bicycle?"},
    ]


def _check(server: ServerProcess, n: int, concurrency: int) -> None:
    stats = server.stats()
    answered = sum(stats["answered"].values())
    attempts = sum(stats["attempts"].values())
    if answered != n or attempts != n or len(stats["answered"]) != n:
        raise RuntimeError(f"bench: {n} requests sent, server answered {answered} of {attempts}")
    if stats["max_inflight"] > concurrency:
        raise RuntimeError(
            f"bench: concurrency {concurrency} exceeded (server saw {stats['max_inflight']})"
        )


@dataclass
class Timing:
    requests: int
    seconds: float
    client_cpu: float


async def _gateway_run(base_url: str, concurrency: int, n: int, tag: str, cache: Path) -> Timing:
    """The Gateway as the workflow uses it: openai backend, SQLite cache, ledger."""
    spec = EndpointSpec(
        role="agent",
        backend="openai",
        model="bench-model",
        base_url=base_url,
        concurrency=concurrency,
        timeout=60.0,
        max_retries=2,
    )
    gateway = Gateway({"agent": spec}, cache_path=cache)
    try:
        # Warm-up: open the connection pool, outside the timed region.
        warm = [
            ChatRequest("agent", "bench", _messages(f"warm-{tag}", i)) for i in range(concurrency)
        ]
        await asyncio.gather(*(gateway.chat(r) for r in warm))
        requests = [ChatRequest("agent", "bench", _messages(tag, i)) for i in range(n)]
        cpu, started = time.process_time(), time.perf_counter()
        replies = await asyncio.gather(*(gateway.chat(r) for r in requests))
        timing = Timing(n, time.perf_counter() - started, time.process_time() - cpu)
        if any(reply.cache_hit for reply in replies):
            raise RuntimeError("bench: a request hit the cache; prompts must be unique")
        return timing
    finally:
        await gateway.aclose()
        gateway.close()


async def _async_openai_run(base_url: str, concurrency: int, n: int, tag: str) -> Timing:
    """What one would write by hand: AsyncOpenAI (default httpx transport) and a semaphore."""
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, timeout=60.0)
    slots = asyncio.Semaphore(concurrency)

    async def one(messages: list[dict[str, str]]) -> None:
        async with slots:
            await client.chat.completions.create(
                model="bench-model", messages=messages, temperature=0.0, max_tokens=512
            )

    try:
        await asyncio.gather(*(one(_messages(f"warm-{tag}", i)) for i in range(concurrency)))
        cpu, started = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(_messages(tag, i)) for i in range(n)))
        return Timing(n, time.perf_counter() - started, time.process_time() - cpu)
    finally:
        await client.close()


async def _aiohttp_run(base_url: str, concurrency: int, n: int, tag: str) -> Timing:
    """The floor: bare aiohttp posting the same JSON (no openai, no gateway), for reference."""
    import aiohttp

    slots = asyncio.Semaphore(concurrency)
    url = f"{base_url}/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(messages: list[dict[str, str]]) -> None:
            body = {"model": "bench-model", "messages": messages, "temperature": 0.0}
            async with slots, session.post(url, json={**body, "max_tokens": 512}) as reply:
                reply.raise_for_status()
                await reply.json()

        await asyncio.gather(*(one(_messages(f"warm-{tag}", i)) for i in range(concurrency)))
        cpu, started = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(_messages(tag, i)) for i in range(n)))
        return Timing(n, time.perf_counter() - started, time.process_time() - cpu)


def _sequential_run(base_url: str, n: int, tag: str) -> Timing:
    """The baseline: a plain synchronous openai client, one request after another."""
    client = openai.OpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, timeout=60.0)
    try:
        client.chat.completions.create(model="bench-model", messages=_messages(f"warm-{tag}", 0))
        cpu, started = time.process_time(), time.perf_counter()
        for i in range(n):
            client.chat.completions.create(
                model="bench-model", messages=_messages(tag, i), temperature=0.0, max_tokens=512
            )
        return Timing(n, time.perf_counter() - started, time.process_time() - cpu)
    finally:
        client.close()


def _measure(
    server: ServerProcess, row: Row, warm: int, call: Callable[..., Timing], *args
) -> None:
    """One run: reset the server, time ``call(*args)``, check the server's counters, record."""
    server.reset()
    server_cpu = server.cpu_seconds()
    timing = call(*args)
    server_cpu = server.cpu_seconds() - server_cpu
    _check(server, row.requests + warm, row.concurrency)
    row.runs.append(timing.requests / timing.seconds)
    row.client_cpu_ms.append(1000 * timing.client_cpu / timing.requests)
    row.server_cpu_ms.append(1000 * server_cpu / (timing.requests + warm))
    row.load.append(os.getloadavg()[0])


def _in_new_loop(make: Callable[..., Awaitable[Timing]], *args) -> Timing:
    return asyncio.run(make(*args))


def run(
    latency: float,
    concurrencies: list[int],
    runs: int,
    seconds: float,
    compare: bool,
    jitter: float = 0.0,
) -> list[Row]:
    server = ServerProcess(latency, jitter)
    url = server.base_url
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            n_seq = max(10, round(seconds / latency))
            row = Row("openai.OpenAI, sequential", 1, n_seq, 1 / latency)
            for r in range(runs):
                _measure(server, row, 1, _sequential_run, url, n_seq, f"s{r}")
            rows.append(row)
            _progress(row)
            for c in concurrencies:
                n = max(20, round(seconds * c / latency))
                row = Row("mnemoflow Gateway", c, n, c / latency)
                for r in range(runs):
                    cache = Path(tmp) / f"cache-{c}-{r}.sqlite"
                    _measure(
                        server, row, c, _in_new_loop, _gateway_run, url, c, n, f"g{c}-{r}", cache
                    )
                rows.append(row)
                _progress(row)
                if compare:
                    row = Row("openai.AsyncOpenAI + semaphore", c, n, c / latency)
                    for r in range(runs):
                        _measure(
                            server, row, c, _in_new_loop, _async_openai_run, url, c, n, f"a{c}-{r}"
                        )
                    rows.append(row)
                    _progress(row)
                    row = Row("bare aiohttp + semaphore (floor)", c, n, c / latency)
                    for r in range(runs):
                        _measure(server, row, c, _in_new_loop, _aiohttp_run, url, c, n, f"h{c}-{r}")
                    rows.append(row)
                    _progress(row)
    finally:
        server.close()
    return rows


def _progress(row: Row) -> None:
    print(
        f"{row.client} c={row.concurrency}: median {row.median:.1f} req/s "
        f"= {100 * row.ratio:.1f} % of ideal",
        file=sys.stderr,
    )


def table(rows: list[Row], latency: float) -> str:
    lines = [
        "| client | concurrency | requests/run | req/s (median) | runs "
        f"| ideal ({latency * 1000:g} ms) | % of ideal | client CPU ms/req | server CPU ms/req "
        "| load avg |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        runs = ", ".join(f"{rate:.0f}" for rate in row.runs)
        lines.append(
            f"| {row.client} | {row.concurrency} | {row.requests} | {row.median:.1f} | {runs} "
            f"| {row.ideal:.0f} | {100 * row.ratio:.1f} "
            f"| {statistics.median(row.client_cpu_ms):.2f} "
            f"| {statistics.median(row.server_cpu_ms):.2f} "
            f"| {statistics.median(row.load):.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="server latency uniform in latency * [1 - j, 1 + j] (same mean; default fixed)",
    )
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="ideal seconds per run")
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="skip the comparison rows (AsyncOpenAI + semaphore, bare aiohttp)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    rows = run(
        args.latency, concurrencies, args.runs, args.seconds, not args.no_compare, args.jitter
    )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"machine: {machine}; openai {openai.__version__}; latency jitter {args.jitter:g}")
    print(table(rows, args.latency))
    if args.json:
        payload = {
            "machine": machine,
            "latency": args.latency,
            "jitter": args.jitter,
            "runs": args.runs,
            "seconds": args.seconds,
            "rows": [{**asdict(row), "median": row.median, "ratio": row.ratio} for row in rows],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
