"""Scale check of AMemGym generation (issue 13 item 7): a ``v1.extra``-shaped environment (20
periods, 3 states per question) generated for N users with the offline backend, then run through
the on-policy loop, all by the workflow. Reports wall time, peak memory of the largest process and
the number of jobs.

    python -m bench.environment_scale --users 200 --out bench/environment_scale.json

The shipped persona pool has 48 personas, so the bench writes N synthetic personas in
Nemotron-Personas' columns (names and fields recombined from the pool) to a parquet in the work
folder and points ``generate.personas.path`` at it, the way a user with the real parquet would.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from mnemoflow.data.amemgym_procedural import read_personas

ROOT = Path(__file__).resolve().parents[1]
SURNAMES = (
    "Alvarez",
    "Brennan",
    "Chen",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Patel",
)


def synthetic_personas(n: int) -> pd.DataFrame:
    """``n`` Nemotron-shaped rows: the pool's people under new surnames, one row per person."""
    pool = read_personas()
    rows = []
    for i in range(n):
        base = pool[i % len(pool)]
        name = f"{str(base['name']).split()[0]} {SURNAMES[(i // len(pool)) % len(SURNAMES)]}"
        if i >= len(pool) * len(SURNAMES):
            raise SystemExit(f"at most {len(pool) * len(SURNAMES)} synthetic personas")
        rows.append(
            {
                "uuid": f"00000000-0000-4000-8000-{i:012d}",
                "persona": f"{name} is a {base['occupation']}. {base['complementary_info']}",
                "professional_persona": f"{name} works as a {base['occupation']}.",
                "sports_persona": "",
                "arts_persona": "",
                "travel_persona": "",
                "culinary_persona": "",
                "career_goals_and_ambitions": "",
                "skills_and_expertise": str(base["skills_and_expertise"]),
                "skills_and_expertise_list": repr([str(base["skills_and_expertise"])]),
                "hobbies_and_interests": str(base["hobbies_and_interests"]),
                "hobbies_and_interests_list": repr([str(base["hobbies_and_interests"])]),
                "sex": str(base["gender"]),
                "age": int(base["age"]),
                "marital_status": str(base["marital_status"]),
                "education_level": str(base["education_level"]),
                "bachelors_field": "",
                "occupation": str(base["occupation"]),
            }
        )
    return pd.DataFrame(rows)


def run(users: int, system: str, shards: int, cores: int, work: Path) -> dict:
    personas = work / "personas.parquet"
    synthetic_personas(users).to_parquet(personas)
    config = {
        "run": {"benchmarks": ["amemgym_scale"], "systems": [system]},
        "benchmarks": {
            "amemgym_scale": {
                "loader": "amemgym",
                "protocols": ["interactive"],
                "systems": [system],
                "generate": {
                    "method": "llm",
                    "preset": "v1.extra",
                    "num_user_profiles": users,
                    "personas": {"path": str(personas)},
                },
                "seed": 0,
                "shards": shards,
            }
        },
    }
    override = work / "scale.yaml"
    override.write_text(yaml.safe_dump(config))
    command = [
        "/usr/bin/time", "-v", sys.executable, "-m", "snakemake", "--cores", str(cores),
        "--snakefile", str(ROOT / "Snakefile"), "--directory", str(work),
        "--configfile", str(ROOT / "config.yaml"), str(override),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"snakemake failed ({done.returncode})")
    steps = re.findall(r"(\d+) of (\d+) steps \(100%\) done", done.stderr)
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    data = json.loads((work / "results/amemgym_scale/environment/data.json").read_text())
    report = pd.read_parquet(work / "results/amemgym_scale/environment/generation_report.parquet")
    periods = sum(len(user["periods"]) for user in data)
    sessions = sum(len(p["sessions"]) for user in data for p in user["periods"])
    return {
        "users": users,
        "system": system,
        "shards": shards,
        "cores": cores,
        "jobs": int(steps[-1][1]) if steps else None,
        "wall_s": round(wall, 1),
        "peak_rss_mb_largest_process": round(peak_kb / 1024, 1),
        "users_generated": len(data),
        "users_failed": int(report.groupby("user")["failed"].any().sum()),
        "periods_per_user": periods / max(1, len(data)),
        "sessions": sessions,
        "questions_per_user": sum(len(u["qas"]) for u in data) / max(1, len(data)),
        "state_types_per_user": sum(len(u["state_schema"]) for u in data) / max(1, len(data)),
        "generation_calls": int(report["calls"].sum()),
        "data_json_mb": round((work / "results/amemgym_scale/environment/data.json").stat().st_size
                              / 2**20, 2),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--system", default="native")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temp)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="mnemoflow-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    result = run(args.users, args.system, args.shards, args.cores, work)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
