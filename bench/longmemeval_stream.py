"""Peak memory of the streaming LongMemEval loader on a generated LongMemEval-M-shaped file.

Writes a JSON array in the official layout (``haystack_sessions`` drawn from a shared pool of
sessions, evidence turns with ``has_answer``, int answers, ``_abs`` questions), then loads it in a
fresh process and reports the loader's peak RSS and time. With ``--baseline`` it also measures
``json.load`` of the same file, i.e. what a non-streaming loader would need before converting.

    python -m bench.longmemeval_stream --mb 400 [--baseline] [--keep PATH]

Memory grows with the distinct sessions kept (the unified ``sessions`` table), not with the file:
M haystacks repeat the same filler sessions across questions.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "memory assistant recipe travel budget garden weekend concert library project deadline "
    "doctor appointment coffee bicycle museum painting language lesson apartment rent "
    "birthday gift hiking trail running shoes podcast episode chess opening vacation"
).split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _session(rng: random.Random, turns: int, evidence: bool) -> list[dict]:
    out = []
    for k in range(turns):
        turn = {"role": "user" if k % 2 == 0 else "assistant", "content": _text(rng, 120)}
        if evidence:
            turn["has_answer"] = k == 0
        out.append(turn)
    return out


def generate(path: Path, target_mb: int, sessions_per_haystack: int = 500, seed: int = 0) -> dict:
    """Write a LongMemEval-shaped file of about ``target_mb`` MB; return its shape."""
    rng = random.Random(seed)
    pool_size = 4000
    pool = [(f"sharegpt_{i:05d}_0", _session(rng, 10, False)) for i in range(pool_size)]
    per_haystack = sessions_per_haystack * 10 * 120 * 7  # bytes, roughly
    n_questions = max(2, int(target_mb * 1e6 / per_haystack))
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for q in range(n_questions):
            picks = rng.sample(range(pool_size), sessions_per_haystack - 1)
            ids = [pool[i][0] for i in picks]
            sessions = [pool[i][1] for i in picks]
            answer_id = f"answer_{q:04d}_1"
            spot = rng.randrange(len(ids) + 1)
            ids.insert(spot, answer_id)
            sessions.insert(spot, _session(rng, 6, True))
            record = {
                "question_id": f"q{q:04d}" + ("_abs" if q % 17 == 0 else ""),
                "question_type": rng.choice(["multi-session", "temporal-reasoning"]),
                "question": _text(rng, 12) + "?",
                "answer": q if q % 5 == 0 else _text(rng, 4),
                "question_date": "2023/06/01 (Thu) 10:00",
                "haystack_dates": [
                    f"2023/05/{1 + i * 28 // len(ids):02d} (Mon) 09:{i % 60:02d}"
                    for i in range(len(ids))
                ],
                "haystack_session_ids": ids,
                "haystack_sessions": sessions,
                "answer_session_ids": [answer_id],
            }
            out.write(("," if q else "") + json.dumps(record))
        out.write("]")
    return {"questions": n_questions, "pool": pool_size, "per_haystack": sessions_per_haystack}


def _child(mode: str, path: str) -> None:
    start = time.perf_counter()
    if mode == "stream":
        from mnemoflow.data.longmemeval import parse

        prepared = parse(Path(path))
        shape = {
            "turns": len(prepared.sessions),
            "sessions": int(prepared.sessions["session_id"].nunique()),
            "episode_sessions": len(prepared.episode_sessions),
            "questions": len(prepared.questions),
        }
    else:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        shape = {"records": len(data)}
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {"mode": mode, "seconds": round(elapsed, 1), "peak_rss_mb": round(peak_mb)} | shape
        )
    )


def measure(mode: str, path: Path) -> dict:
    cmd = [sys.executable, "-m", "bench.longmemeval_stream", "--child", mode, str(path)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400, help="approximate file size in MB")
    parser.add_argument("--baseline", action="store_true", help="also measure json.load")
    parser.add_argument("--keep", type=Path, help="write the file here and keep it")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "longmemeval_m_like.json"
        shape = generate(path, args.mb)
        size_mb = path.stat().st_size / 1e6
        print(f"file: {size_mb:.0f} MB, {shape}")
        print(json.dumps(measure("stream", path)))
        if args.baseline:
            print(json.dumps(measure("json.load", path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
