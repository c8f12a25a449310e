"""A whole run of the LongMemEval-S shape against the test server: ``python -m bench.whole_run``.

Method (recorded in docs/performance.md): a stand-in LongMemEval-S file is written in the official
layout, ``--questions`` questions (500 in LongMemEval-S) each with a haystack of ``--sessions``
sessions (about 50 in S) of ``--turns`` short turns (S's turns are long; short turns keep the bench
about model calls, not tokenizing). The test server runs in its own process, answers every chat
completion after ``--latency`` (50 ms) with a text that every caller here parses (a writer's facts
/ events JSON that also says "yes" to the judge, naming a digest of the request), and every chat
role (agent, judge, memory_writer) is bound to it with ``concurrency: --concurrency`` (64); the
embedder is the offline hashed bag of words. Then the repository's workflow runs as a user runs it,
``snakemake --cores --cores`` in a fresh working directory with an empty cache, for ``--systems``
(the default run's seven), end to end (prepare, ingest, answer, judge, score, summary, report):
Snakemake's own start-up, DAG and every job's start-up are inside the wall-clock time.

Rate = chat completions the server answered / wall-clock seconds of the ``snakemake`` process. The
gateway's own rate (bench.gateway's method: independent requests from one process at the same
concurrency, ``--gateway-seconds`` of ideal work) is measured in the same run, between workflow
runs; the figure is the ratio of the medians over ``--runs`` runs. The workflow's share of the
endpoint per job is ``concurrency / endpoint_jobs`` (config ``endpoint_jobs``; here ``--cores``, so
the jobs Snakemake runs at once hold the whole endpoint between them).

    python -m bench.whole_run                      # the full shape: 500 questions x 7 systems
    python -m bench.whole_run --questions 100 --shards 1 --runs 3   # a fifth of it, one shard
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.gateway import ServerProcess, _gateway_run
from mnemoflow.testing.openai_server import OpenAITestServer

REPO = Path(__file__).resolve().parent.parent

#: The default run's seven systems (config.yaml run.systems).
SYSTEMS = "none,full_context,bm25_message,bm25_session,dense_message,rag,agentic_external"


def reply(body: dict) -> str:
    """One reply every caller of this run parses: the writers' facts and events (agentic_external,
    rag), the key-value writer's empty update, and a judge's "yes"; the reader takes it as its
    answer. A reply no one parses would multiply the writers' calls by their re-asks. It names a
    digest of the request, so two systems' answers differ and their judge prompts do too (with one
    fixed reply, every system after the first found its judgements in the cache)."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    fact = f"yes, the user keeps the bicycle in the hallway ({digest})"
    return json.dumps(
        {"facts": [fact], "memory": [{"event": "ADD", "text": fact}], "set": [], "delete": []}
    )


def serve(argv: list[str]) -> int:
    """The test server with :func:`reply` (``python -m bench.whole_run --serve --latency S``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--jitter", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = OpenAITestServer(latency=args.latency, jitter=args.jitter, reply=reply)

    async def run() -> None:
        await server.astart()
        print(f"serving {server.base_url}", flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()
        await server.astop()

    asyncio.run(run())
    return 0


WORDS = (
    "memory assistant recipe travel budget garden weekend concert library project deadline "
    "doctor appointment coffee bicycle museum painting language lesson apartment rent "
    "birthday gift hiking trail running shoes podcast episode chess opening vacation"
).split()


def write_haystack(
    path: Path, questions: int, sessions: int, turns: int, words: int, seed: int = 0
) -> dict[str, int]:
    """A LongMemEval-S stand-in in the official layout: ``sessions`` sessions per question's
    haystack (one of them the evidence session), drawn from a shared pool as in the release."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    def session(evidence: bool) -> list[dict]:
        out = []
        for k in range(turns):
            turn = {"role": "user" if k % 2 == 0 else "assistant", "content": text(words)}
            if evidence:
                turn["has_answer"] = k == 0
            out.append(turn)
        return out

    pool = [(f"sharegpt_{i:05d}_0", session(False)) for i in range(max(4 * sessions, 200))]
    records = []
    for q in range(questions):
        picks = rng.sample(range(len(pool)), sessions - 1)
        ids = [pool[i][0] for i in picks]
        bodies = [pool[i][1] for i in picks]
        spot = rng.randrange(len(ids) + 1)
        ids.insert(spot, f"answer_{q:04d}_1")
        bodies.insert(spot, session(True))
        records.append(
            {
                "question_id": f"q{q:04d}",
                "question_type": rng.choice(["multi-session", "temporal-reasoning"]),
                "question": text(10) + "?",
                "answer": text(3),
                "question_date": "2023/06/01 (Thu) 10:00",
                "haystack_dates": [
                    f"2023/05/{1 + i * 28 // len(ids):02d} (Mon) 09:{i % 60:02d}"
                    for i in range(len(ids))
                ],
                "haystack_session_ids": ids,
                "haystack_sessions": bodies,
                "answer_session_ids": [f"answer_{q:04d}_1"],
            }
        )
    path.write_text(json.dumps(records), encoding="utf-8")
    return {"questions": questions, "sessions": sessions, "turns": questions * sessions * turns}


def override(base_url: str, data: Path, args: argparse.Namespace) -> str:
    """The run's config on top of the shipped config.yaml (YAML is a superset of JSON)."""
    chat = {"base_url": base_url, "model": "bench-model", "concurrency": args.concurrency}
    config = {
        "run": {"benchmarks": ["lme_standin"], "systems": args.systems.split(",")},
        "models": {
            "agent": chat,
            "judge": chat,
            "memory_writer": chat,
            "user": {},
            "embedder": {"backend": "offline"},
        },
        "allow_offline_roles": ["embedder"],
        "endpoint_jobs": args.endpoint_jobs or args.cores,
        "benchmarks": {
            "lme_standin": {
                "loader": "longmemeval",
                "source": {"path": str(data)},
                "shards": args.shards,
                "reader": {
                    "name": "longmemeval",
                    "mode": "retrieval",
                    "history_format": "json",
                    "method": "direct",
                },
            }
        },
    }
    return json.dumps(config, indent=1)


def workflow_run(work: Path, config: Path, cores: int, *extra: str) -> tuple[float, str]:
    """``snakemake`` on the repository's Snakefile in ``work``: (wall seconds, its output)."""
    shutil.copy(REPO / "config.yaml", work / "config.yaml")
    command = [
        sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
        str(work), "--cores", str(cores), "--workflow-profile", str(REPO / "profiles/default"),
        "--configfile", str(config), "--quiet", "rules", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"bench: the workflow failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return seconds, done.stdout + done.stderr


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule from Snakemake's job-stats table."""
    counts: dict[str, int] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            counts[parts[0]] = int(parts[1])
    return counts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--serve" in argv:
        return serve(argv)
    parser = argparse.ArgumentParser(prog="python -m bench.whole_run", description=__doc__)
    parser.add_argument("--questions", type=int, default=500, help="LongMemEval-S: 500")
    parser.add_argument("--sessions", type=int, default=50, help="per haystack; S: about 50")
    parser.add_argument("--turns", type=int, default=4, help="turns per session")
    parser.add_argument("--words", type=int, default=12, help="words per turn (short turns)")
    parser.add_argument("--systems", default=SYSTEMS, help=f"comma-separated (default {SYSTEMS})")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--endpoint-jobs", type=int, default=0, help="config endpoint_jobs (default: --cores)"
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gateway-seconds", type=float, default=4.0)
    parser.add_argument("--keep", type=Path, help="keep the working directories here")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="whole_run-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    data = root / "longmemeval_s_standin.json"
    shape = write_haystack(data, args.questions, args.sessions, args.turns, args.words)
    server = ServerProcess(args.latency, module="bench.whole_run", options=("--serve",))
    runs: list[dict] = []
    try:
        dry = root / "dry"
        dry.mkdir(exist_ok=True)
        (dry / "bench.yaml").write_text(override(server.base_url, data, args))
        jobs = job_counts(workflow_run(dry, dry / "bench.yaml", args.cores, "--dry-run")[1])
        print(f"jobs: {sum(jobs.values())} {jobs}", file=sys.stderr)
        for r in range(args.runs):
            work = root / f"run{r}"
            if work.exists():
                shutil.rmtree(work)
            work.mkdir()
            config = work / "bench.yaml"
            config.write_text(override(server.base_url, data, args))
            server.reset()
            seconds, _ = workflow_run(work, config, args.cores)
            stats = server.stats()
            calls = sum(stats["answered"].values())
            server.reset()
            n = round(args.gateway_seconds * args.concurrency / args.latency)
            timing = asyncio.run(
                _gateway_run(server.base_url, args.concurrency, n, f"w{r}", work / "gcache")
            )
            run = {
                "workflow_seconds": seconds,
                "calls": calls,
                "max_inflight": stats["max_inflight"],
                "workflow_calls_per_s": calls / seconds,
                "gateway_calls_per_s": timing.requests / timing.seconds,
                "load": os.getloadavg()[0],
            }
            run["ratio"] = run["workflow_calls_per_s"] / run["gateway_calls_per_s"]
            runs.append(run)
            print(
                f"run {r}: {calls} calls in {seconds:.1f} s = {run['workflow_calls_per_s']:.0f}/s, "
                f"gateway {run['gateway_calls_per_s']:.0f}/s, ratio {run['ratio']:.1%}, "
                f"max in flight {stats['max_inflight']}, "
                f"load {run['load']:.1f}",
                file=sys.stderr,
            )
            if args.keep is None:
                shutil.rmtree(work)
    finally:
        server.close()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    workflow = statistics.median(r["workflow_calls_per_s"] for r in runs)
    gateway = statistics.median(r["gateway_calls_per_s"] for r in runs)
    figures = {
        "shape": shape,
        "systems": args.systems.split(","),
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "cores": args.cores,
        "jobs": jobs,
        "workflow_calls_per_s": workflow,
        "gateway_calls_per_s": gateway,
        "ratio": workflow / gateway,
        "runs": runs,
    }
    print(
        f"whole run ({args.questions} questions x {len(figures['systems'])} systems, "
        f"{args.sessions} sessions of {args.turns} turns each): {workflow:.0f} calls/s; gateway "
        f"alone {gateway:.0f} calls/s at concurrency {args.concurrency}; ratio "
        f"{workflow / gateway:.1%} (median of {args.runs} runs: "
        + ", ".join(f"{r['ratio']:.1%}" for r in runs)
        + ")"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
