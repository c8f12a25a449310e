"""Fault soak: does the workflow give the clean run's tables under endpoint faults and a kill -9?

    python -m bench.faults [--out bench/faults.json] [--kill-after 20]

A small workflow (synthetic benchmark, 3 systems, 2 steps; the ``agent`` and ``judge`` roles on
the local OpenAI-compatible test server, which needs an API key from an environment variable)
runs three times, each in its own working directory and with its own response cache:

1. **clean**: the server answers every request;
2. **faults**: the server draws, per request body and attempt (seeded, so reproducible), 10 %
   HTTP 500, 5 % 502, 5 % 503 (20 % 5xx), 10 % 429 with Retry-After, 5 % timeouts (the server
   hangs past the client's timeout) and 5 % malformed replies (HTTP 200 whose text no parser
   accepts, which the gateway must re-ask);
3. **kill**: the same faults, the Snakemake process group is killed with SIGKILL once the first
   answers are written, then ``snakemake --unlock`` and a rerun to completion;
4. **verbose**: no transport faults, but every reply starts with a thinking block holding a wrong
   draft (the server's ``think="inline"``) and the judge writes its verdicts as judge models do
   (:mod:`mnemoflow.testing.verbose_judge`: misleading first words, echoes of the instructions,
   negation, markdown; one first reply in 7 states both verdicts and is re-asked). Its verdicts
   must be the clean run's: a differing judgement is a misread verdict.

Reported per faulty run: lost items (answer / judgement rows of the clean run that are missing),
judgement rows whose value or parse_ok differ from the clean run, summary rows that differ,
parse failures left in the ledgers, requests repeated (kill run: answers the server gave for a body
beyond what the uninterrupted faults run needed), and files holding the API key. The server runs
in this process (a thread); Snakemake and its jobs are separate processes that reach it over
loopback, as a real endpoint would be reached. The judge and agent replies are deterministic
functions of the prompt (a strict judge, a reader that quotes the best-matching memory excerpt).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mnemoflow.data.tables import TIMED_METRICS
from mnemoflow.lexical import content_words
from mnemoflow.testing.openai_server import GARBLED_TEXT, OpenAITestServer, original_body
from mnemoflow.testing.verbose_judge import verbose

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "MNEMOFLOW_SOAK_KEY"
KEY = "sk-mnemoflow-soak-4f1c9a7e2b6d8053"

#: The issue's fault mix: 20 % 5xx, 10 % 429 with Retry-After, 5 % timeouts, 5 % malformed.
FAULTS = {"500": 0.10, "502": 0.05, "503": 0.05, "429": 0.10, "timeout": 0.05, "garbled": 0.05}

SYSTEMS = ["none", "bm25_message", "full_context"]
JUDGEMENT_KEYS = ["benchmark", "system", "protocol", "step", "question_id", "metric"]
SUMMARY_KEYS = ["benchmark", "system", "protocol", "step", "metric", "aggregate"]

_GRADED = re.compile(r"Correct answer: (.*?)\nModel response: (.*?)\n\nIs the model", re.DOTALL)
_ABSTAINS = re.compile(r"Model response: (.*?)\n\nDoes the model abstain\?", re.DOTALL)


def soak_reply(body: dict[str, Any]) -> str:
    """A strict judge for judge prompts; otherwise a reader answering from the best excerpt."""
    prompt = original_body(body)["messages"][-1]["content"]  # a re-ask: its original prompt
    abstains = _ABSTAINS.search(prompt)
    if abstains is not None:
        return "yes" if "don't know" in abstains.group(1).lower() else "no"
    graded = _GRADED.search(prompt)
    if graded is not None:
        reference, response = (" ".join(content_words(m)) for m in graded.groups())
        return "yes" if reference and reference in response else "no"
    question = set(content_words(prompt.split("Question:")[-1].split("\n")[0]))
    excerpts = prompt.split("Memory excerpts:")[-1].split("Current date:")[0].splitlines()
    scored = [
        (len(question & set(content_words(line))), -i, line) for i, line in enumerate(excerpts)
    ]
    best = max(scored, default=(0, 0, ""))
    evidence = set(content_words(best[2])) if best[0] else set()
    options = re.findall(r"^- (.*)$", prompt.split("Options:")[-1], re.MULTILINE)
    if "Options:" in prompt:
        for option in options:
            words = set(content_words(option))
            if words and words <= evidence:
                return option
        return "I don't know."
    return best[2].split("] ", 1)[-1] if best[0] else "I don't know."


def verbose_reply(body: dict[str, Any]) -> str:
    """:func:`soak_reply`, with each judge verdict written out as a verbose judge would."""
    reply = soak_reply(body)
    prompt = original_body(body)["messages"][-1]["content"]
    judged = _ABSTAINS.search(prompt) or _GRADED.search(prompt)
    return verbose(reply, body) if judged else reply


def override(base_url: str) -> dict[str, Any]:
    endpoint = {
        "base_url": base_url,
        "model": "soak-model",
        "api_key_env": KEY_ENV,
        "concurrency": 4,
        "timeout": 1.0,  # the server's timeout fault hangs for 3 s
        "max_retries": 12,
    }
    return {
        "run": {"benchmarks": ["synthetic"], "systems": SYSTEMS},
        "models": {"agent": endpoint, "judge": endpoint, "embedder": {"backend": "offline"}},
        # the memory systems here call no writer; the embedder is the offline one on purpose
        "allow_offline_roles": ["memory_writer", "embedder"],
        "benchmarks": {
            "synthetic": {
                "loader": "synthetic",
                "shards": 2,
                "use_options": True,  # the reader's reply must name an option: a checked format
                "params": {
                    "users": 3,
                    "periods": 2,
                    "sessions_per_period": 3,
                    "turns_per_session": 4,
                    "attributes_per_user": 4,
                    "updates_per_period": 1,
                    "seed": 3,
                },
            }
        },
    }


def snakemake_command(workdir: Path, *extra: str) -> list[str]:
    config = str(workdir / "soak.yaml")
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
            str(workdir), "--cores", "2", "--configfile", config, *extra]  # fmt: skip


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: KEY}


def prepare_workdir(root: Path, name: str, base_url: str) -> Path:
    workdir = root / name
    workdir.mkdir()
    (workdir / "config.yaml").write_text((REPO / "config.yaml").read_text())
    (workdir / "soak.yaml").write_text(yaml.safe_dump(override(base_url)))
    return workdir


def run_to_end(workdir: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        snakemake_command(workdir), capture_output=True, text=True, env=environment()
    )
    if result.returncode != 0:
        raise RuntimeError(f"snakemake failed in {workdir}:\n{result.stderr[-4000:]}")
    return time.perf_counter() - started


def run_killed(workdir: Path, kill_after: float) -> dict[str, Any]:
    """Start the workflow, SIGKILL its process group once answers exist, unlock, rerun."""
    started = time.perf_counter()
    process = subprocess.Popen(
        snakemake_command(workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment(),
        start_new_session=True,  # its own process group: the kill takes its jobs too
    )
    deadline = started + kill_after
    while process.poll() is None and time.perf_counter() < deadline:
        if any(workdir.glob("results/**/answers.parquet")):
            break
        time.sleep(0.2)
    killed_at = time.perf_counter() - started
    finished_before_kill = process.poll() is not None
    if not finished_before_kill:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    answers_before = len(list(workdir.glob("results/**/answers.parquet")))
    unlock = subprocess.run(
        snakemake_command(workdir, "--unlock"), capture_output=True, text=True, env=environment()
    )
    rerun = run_to_end(workdir)
    return {
        "killed_after_s": round(killed_at, 1),
        "finished_before_kill": finished_before_kill,
        "answer_tables_before_kill": answers_before,
        "unlock_exit": unlock.returncode,
        "rerun_s": round(rerun, 1),
    }


def tables(workdir: Path) -> dict[str, pd.DataFrame]:
    def concat(name: str) -> pd.DataFrame:
        return pd.concat(
            [pd.read_parquet(p) for p in sorted(workdir.glob(f"results/**/{name}.parquet"))],
            ignore_index=True,
        )

    return {
        "answers": concat("answers"),
        "judgements": concat("judgements"),
        "summary": pd.read_parquet(workdir / "results" / "summary.parquet"),
    }


def ledger_totals(workdir: Path) -> dict[str, int]:
    totals: dict[str, int] = {}
    for path in workdir.glob("results/**/*ledger.json"):
        for key, value in json.loads(path.read_text())["totals"].items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
    return totals


def differing_rows(
    clean: pd.DataFrame, other: pd.DataFrame, keys: list[str], cols: list[str]
) -> pd.DataFrame:
    """The keys of rows whose ``cols`` differ, or that exist on one side only."""
    merged = clean[keys + cols].merge(
        other[keys + cols], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    changed = merged["_merge"] != "both"
    for col in cols:
        a, b = merged[f"{col}_a"], merged[f"{col}_b"]
        changed |= ~((a == b) | (a.isna() & b.isna()))
    return merged.loc[changed, keys]


def differing(clean: pd.DataFrame, other: pd.DataFrame, keys: list[str], cols: list[str]) -> int:
    """How many rows' ``cols`` differ, or exist on one side only."""
    return len(differing_rows(clean, other, keys, cols))


def results(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary without the rows that time the run (wall clock: never equal twice)."""
    return summary[~summary["metric"].isin(TIMED_METRICS)]


def lost(clean: pd.DataFrame, other: pd.DataFrame, keys: list[str]) -> int:
    have = set(map(tuple, other[keys].itertuples(index=False)))
    return sum(tuple(row) not in have for row in clean[keys].itertuples(index=False))


def leaked(workdir: Path) -> list[str]:
    secret = KEY.encode()
    return [str(p) for p in workdir.rglob("*") if p.is_file() and secret in p.read_bytes()]


def compare(clean: dict[str, pd.DataFrame], workdir: Path) -> dict[str, Any]:
    other = tables(workdir)
    answer_keys = ["benchmark", "system", "protocol", "step", "question_id"]
    totals = ledger_totals(workdir)
    return {
        "answers": len(other["answers"]),
        "judgements": len(other["judgements"]),
        "summary_rows": len(other["summary"]),
        "lost_answers": lost(clean["answers"], other["answers"], answer_keys),
        "lost_judgements": lost(clean["judgements"], other["judgements"], JUDGEMENT_KEYS),
        "differing_answers": differing(
            clean["answers"], other["answers"], answer_keys, ["response"]
        ),
        "differing_judgements": differing(
            clean["judgements"], other["judgements"], JUDGEMENT_KEYS, ["value", "parse_ok"]
        ),
        "differing_summary_rows": differing(
            results(clean["summary"]), results(other["summary"]), SUMMARY_KEYS, ["value", "n"]
        ),
        "differing_summary_metrics": sorted(
            set(
                differing_rows(
                    results(clean["summary"]), results(other["summary"]), SUMMARY_KEYS, ["value"]
                )["metric"]
            )
        ),
        "timed_summary_rows_not_compared": int(
            other["summary"]["metric"].isin(TIMED_METRICS).sum()
        ),
        "parse_failures": totals.get("parse_failures", 0),
        "reasks": totals.get("reasks", 0),
        "retries": totals.get("retries", 0),
        "files_with_key": leaked(workdir),
        # a malformed reply to a free-text question (no options: abstention questions) is an
        # answer no parser can reject; counted so a differing row can be traced to it
        "garbled_free_text_answers": int((other["answers"]["response"] == GARBLED_TEXT).sum()),
    }


def serve(reply=soak_reply, **faults: Any) -> OpenAITestServer:
    return OpenAITestServer(reply=reply, api_key=KEY, retry_after=0.2, hang=3.0, **faults).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "faults.json")
    parser.add_argument("--kill-after", type=float, default=60.0, help="latest kill (seconds)")
    parser.add_argument(
        "--runs",
        nargs="+",
        choices=RUNS,
        default=list(RUNS),
        help="which runs beside the clean one (default: all)",
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"faults": FAULTS, "systems": SYSTEMS}
    with tempfile.TemporaryDirectory(prefix="mnemoflow-soak-") as tmp:
        root = Path(tmp)
        server = serve()
        try:
            workdir = prepare_workdir(root, "clean", server.base_url)
            report["clean_s"] = round(run_to_end(workdir), 1)
            stats = server.stats()
            clean = tables(workdir)
            report["clean"] = {
                "answers": len(clean["answers"]),
                "judgements": len(clean["judgements"]),
                "summary_rows": len(clean["summary"]),
                # the verdicts vary, so an unchanged table is evidence, not a constant
                "judged_correct": int(clean["judgements"]["value"].sum()),
                "requests": stats.total,
                "parse_failures": ledger_totals(workdir).get("parse_failures", 0),
                "files_with_key": leaked(workdir),
            }
        finally:
            server.stop()
        print(f"clean: {report['clean']}", flush=True)
        for name in args.runs:
            RUNS[name](root, clean, report, args)
    report.pop("_faults_stats", None)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def faults_run(root: Path, clean: dict[str, pd.DataFrame], report: dict, args) -> None:
    """The fault mix, no interruption."""
    server = serve(fault_rates=FAULTS)
    try:
        workdir = prepare_workdir(root, "faults", server.base_url)
        report["faults_s"] = round(run_to_end(workdir), 1)
        faults_stats = report["_faults_stats"] = server.stats()
        report["faults_run"] = compare(clean, workdir)
        report["faults_run"]["requests"] = faults_stats.total
        report["faults_run"]["injected"] = dict(faults_stats.faults)
    finally:
        server.stop()
    print(f"faults: {report['faults_run']}", flush=True)


def kill_run(root: Path, clean: dict[str, pd.DataFrame], report: dict, args) -> None:
    """The fault mix and a kill -9; repeated requests are counted against the faults run."""
    faults_stats = report.get("_faults_stats")
    server = serve(fault_rates=FAULTS)
    try:
        workdir = prepare_workdir(root, "kill", server.base_url)
        report["kill"] = run_killed(workdir, args.kill_after)
        kill_stats = server.stats()
        report["kill_run"] = compare(clean, workdir)
        report["kill_run"]["requests"] = kill_stats.total
        report["kill_run"]["injected"] = dict(kill_stats.faults)
        # answers the server gave for a body beyond what the uninterrupted run needed
        if faults_stats is not None:
            report["kill_run"]["repeated_requests"] = sum(
                max(0, n - faults_stats.answered.get(rid, 0))
                for rid, n in kill_stats.answered.items()
            )
    finally:
        server.stop()
    print(f"kill: {report['kill']} {report['kill_run']}", flush=True)


def verbose_run(root: Path, clean: dict[str, pd.DataFrame], report: dict, args) -> None:
    """Verbose judges and thinking blocks, no transport faults: the clean run's tables."""
    server = serve(reply=verbose_reply, think="inline")
    try:
        workdir = prepare_workdir(root, "verbose", server.base_url)
        report["verbose_s"] = round(run_to_end(workdir), 1)
        report["verbose_run"] = compare(clean, workdir)
        report["verbose_run"]["requests"] = server.stats().total
        # a judgement whose value differs from the clean run's is a misread verdict
        report["verbose_run"]["misread_verdicts"] = report["verbose_run"]["differing_judgements"]
    finally:
        server.stop()
    print(f"verbose: {report['verbose_run']}", flush=True)


RUNS = {"faults": faults_run, "kill": kill_run, "verbose": verbose_run}


if __name__ == "__main__":
    sys.exit(main())
