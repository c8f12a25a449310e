"""Throughput of AMemGym's on-policy loop against the test server: ``python -m bench.interactive``.

Method (recorded in docs/performance.md): a procedural environment of ``--users`` users is
generated offline; the test server runs in a separate process and answers every chat completion
after a fixed latency (50 ms). Every role (agent, simulated user) is bound to it with
``concurrency: --concurrency``. One step of the interactive protocol (period 0, then period 1
from period 0's snapshot) runs for the ``full_context`` assistant (AMemGym's native agent: no
memory-writer or embedding calls, so every call is a chat completion the server counts).

Within a user the loop is sequential (each answer depends on the previous turn), users are
independent, so the ideal rate is min(users in flight, concurrency) / latency. The measured rate is
the server's answered requests / wall-clock seconds of the step; each cell is the median of
``--runs`` runs, every run on a fresh cache (all calls reach the server). The gateway's own rate at
the same concurrency (bench.gateway's method: independent requests) is measured in the same run
as the ceiling any protocol can reach here. Client CPU per call (this process's CPU time / calls)
is printed beside the rates: on a shared machine it moves far less than they do.

``--processes P`` runs the users as the workflow's ``shards: P`` would (dealt round-robin; each
shard its own process with ``concurrency / P`` of the endpoint, as ``endpoint_jobs`` shares it):
the same calls and the same ideal, spread over P event loops and P interpreters. The rate is then
all processes' calls / wall-clock seconds from a common start to the last one's end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from bench.gateway import ServerProcess, _gateway_run
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.amemgym_procedural import generate, write_data
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols.interactive import Schedule, run_step, users_in_flight
from mnemoflow.protocols.step import StepContext


async def _loop_run(base_url: str, users, concurrency: int, work: Path) -> tuple[int, float, float]:
    """Periods 0 and 1 of every user; returns (chat calls made, seconds, client CPU seconds)."""
    binding = {"base_url": base_url, "model": "bench", "concurrency": concurrency}
    models = {"agent": binding, "user": binding}
    gateway = Gateway.from_config(models, work / "cache")
    system = {"type": "full_context", "max_tokens": 10**9}
    keys = {"benchmark": "bench", "system": "native", "protocol": "interactive"}
    started, cpu = time.perf_counter(), time.process_time()
    try:
        previous = None
        for step in (0, 1):
            snapshot = work / f"step{step}"
            ctx = StepContext(system, gateway, {**keys, "step": step})
            await run_step(users, step, ctx, previous, snapshot, Schedule())
            previous = snapshot
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        calls = gateway.ledger.totals().calls
    finally:
        await gateway.aclose()
        gateway.close()
    return calls, seconds, cpu


def _shard_worker(base_url, users, concurrency, work, ready, start, results) -> None:
    """One shard's process: wait for the common start, run the loop, report (calls, cpu)."""
    ready.release()
    start.wait()
    calls, _, cpu = asyncio.run(_loop_run(base_url, users, concurrency, work))
    results.put((calls, cpu))


def _sharded_run(
    base_url: str, users, concurrency: int, work: Path, processes: int
) -> tuple[int, float, float]:
    """The loop over ``processes`` shards of the users at once: (calls, wall seconds, CPU)."""
    if processes == 1:
        return asyncio.run(_loop_run(base_url, users, concurrency, work))
    context = multiprocessing.get_context("fork")
    ready, start, results = context.Semaphore(0), context.Event(), context.Queue()
    workers = []
    for shard in range(processes):
        folder = work / f"shard{shard}"
        folder.mkdir()
        share = max(1, concurrency // processes)
        args = (base_url, users[shard::processes], share, folder, ready, start, results)
        workers.append(context.Process(target=_shard_worker, args=args))
        workers[-1].start()
    for _ in workers:
        ready.acquire()
    started = time.perf_counter()
    start.set()
    outcomes = [results.get() for _ in workers]
    seconds = time.perf_counter() - started
    for worker in workers:
        worker.join()
        if worker.exitcode:
            raise RuntimeError(f"bench: a shard process failed (exit {worker.exitcode})")
    return sum(c for c, _ in outcomes), seconds, sum(cpu for _, cpu in outcomes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--processes", type=int, default=1, help="shards of the users, one process each"
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        data = generate({"users": args.users, "periods": 1, "seed": 0, "questions": args.questions})
        write_data(data, Path(tmp))
        users = read_environment(Path(tmp) / "data.json")
        server = ServerProcess(args.latency)
        loop_rates, gateway_rates, calls = [], [], 0
        loop_cpu_ms, gateway_cpu_ms = [], []
        try:
            for run in range(args.runs):
                work = Path(tmp) / f"run{run}"
                work.mkdir()
                server.reset()
                calls, seconds, cpu = _sharded_run(
                    server.base_url, users, args.concurrency, work, args.processes
                )
                answered = sum(server.stats()["answered"].values())
                if answered != calls:
                    raise RuntimeError(f"bench: {calls} calls made, server answered {answered}")
                loop_rates.append(calls / seconds)
                loop_cpu_ms.append(1000 * cpu / calls)
                server.reset()
                timing = asyncio.run(
                    _gateway_run(
                        server.base_url, args.concurrency, calls, f"g{run}", work / "gcache"
                    )
                )
                gateway_rates.append(timing.requests / timing.seconds)
                gateway_cpu_ms.append(1000 * timing.client_cpu / timing.requests)
        finally:
            server.close()

    class _Spec:  # the loop's own rule for users in flight, at this concurrency
        specs = {"agent": type("A", (), {"concurrency": args.concurrency})()}

    in_flight = min(args.users, users_in_flight(_Spec()))
    ideal = min(in_flight, args.concurrency) / args.latency
    loop, ceiling = statistics.median(loop_rates), statistics.median(gateway_rates)
    figures = {
        "users": args.users,
        "questions": args.questions,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "processes": args.processes,
        "calls_per_run": calls,
        "ideal_calls_per_s": ideal,
        "loop_calls_per_s": loop,
        "loop_share_of_ideal": loop / ideal,
        "gateway_calls_per_s": ceiling,
        "loop_ratio_to_gateway": loop / ceiling,
        "loop_client_cpu_ms_per_call": statistics.median(loop_cpu_ms),
        "gateway_client_cpu_ms_per_call": statistics.median(gateway_cpu_ms),
        "runs": {
            "loop": loop_rates,
            "gateway": gateway_rates,
            "loop_cpu_ms": loop_cpu_ms,
            "gateway_cpu_ms": gateway_cpu_ms,
        },
    }
    print(
        f"interactive loop: {loop:.0f} calls/s = {loop / ideal:.1%} of ideal {ideal:.0f} "
        f"(min(users in flight {in_flight}, concurrency {args.concurrency}) / "
        f"{args.latency * 1000:.0f} ms); gateway alone {ceiling:.0f} calls/s; "
        f"loop / gateway {loop / ceiling:.1%}; client CPU per call: loop "
        f"{statistics.median(loop_cpu_ms):.2f} ms, gateway {statistics.median(gateway_cpu_ms):.2f} "
        f"ms; {calls} calls per run, median of {args.runs}"
    )
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
