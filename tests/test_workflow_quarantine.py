"""A corrupt output is quarantined when the workflow is parsed and made again from the cache,
and no valid file is deleted or rewritten but those that depend on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemoflow.data.integrity import verify
from mnemoflow.data.tables import TIMED_METRICS, read_table
from tests.test_integrity import fingerprint, truncate
from tests.workflow import copy_run, snakemake

pytestmark = pytest.mark.slow

ANSWERS = "results/synthetic/bm25_message/qa/step0/shard0/answers.parquet"
JUDGEMENTS = "results/synthetic/none/qa/step1/shard1/judgements.parquet"
SUMMARY = "results/summary.parquet"


def untimed(summary):
    return summary[~summary["metric"].isin(TIMED_METRICS)].reset_index(drop=True)


def test_truncated_tables_are_rebuilt_from_the_cache_and_siblings_kept(tiny_run, tmp_path):
    wd = copy_run(tiny_run, tmp_path / "wd")
    assert verify(wd / "results")[0] == []
    # every job with a ledger lists its other outputs' sizes and sha256 in it (for verify)
    recorded = json.loads((wd / ANSWERS).with_name("answers.ledger.json").read_text())["outputs"]
    assert recorded["answers.parquet"]["bytes"] == (wd / ANSWERS).stat().st_size
    files = [
        p
        for p in sorted((wd / "results").rglob("*"))
        if p.is_file() and p.relative_to(wd / "results").parts[0] not in ("logs", "cache", "report")
    ]
    before = {p: fingerprint(p) for p in files}
    originals = {name: read_table(wd / name) for name in (ANSWERS, JUDGEMENTS, SUMMARY)}
    truncate(wd / ANSWERS, keep_mtime=False)
    truncate(wd / JUDGEMENTS, keep_mtime=True)  # Snakemake alone would never notice this one
    truncate(wd / SUMMARY, keep_mtime=False)

    log = snakemake(wd)

    for name in (ANSWERS, JUDGEMENTS, SUMMARY):
        assert f"{name}: not a readable Parquet file" in log
        assert (wd / "results/quarantine" / Path(name).relative_to("results")).is_file()
    rebuilt_answers = read_table(wd / ANSWERS, "answers")
    assert rebuilt_answers["response"].tolist() == originals[ANSWERS]["response"].tolist()
    assert rebuilt_answers["cache_hit"].all()
    rebuilt = read_table(wd / JUDGEMENTS, "judgements")
    assert rebuilt[["question_id", "value", "parse_ok"]].equals(
        originals[JUDGEMENTS][["question_id", "value", "parse_ok"]]
    )
    # the same summary, but the wall-clock timings of the retrievals the rerun answers made
    summary = read_table(wd / SUMMARY, "summary")
    assert untimed(summary).equals(untimed(originals[SUMMARY]))
    assert (wd / "results/report.html").is_file()

    # 0 model calls: every call of the jobs made again was answered by the response cache
    for ledger in (
        "results/synthetic/bm25_message/qa/step0/shard0/answers.ledger.json",
        "results/synthetic/bm25_message/qa/step0/shard0/judgements.ledger.json",
        "results/synthetic/none/qa/step1/shard1/judgements.ledger.json",
    ):
        totals = json.loads((wd / ledger).read_text())["totals"]
        assert totals["calls"] > 0 and totals["cache_hits"] == totals["calls"], ledger

    # only the bad files' own jobs and what depends on them wrote anything
    changed = {str(p.relative_to(wd)) for p, stamp in before.items() if fingerprint(p) != stamp}
    shard0 = "results/synthetic/bm25_message/qa/step0/shard0"
    shard1 = "results/synthetic/none/qa/step1/shard1"
    dependants = {
        *(f"{shard0}/{n}" for n in ("answers.ledger.json", "judgements.parquet")),
        *(f"{shard0}/{n}" for n in ("judgements.ledger.json", "judge.json")),
        *(f"{shard1}/{n}" for n in ("judgements.ledger.json", "judge.json")),
        *(
            f"results/synthetic/{run}/{n}"
            for run in ("bm25_message/qa/step0", "none/qa/step1")
            for n in ("scores.parquet", "question_scores.parquet", "diagnosis.parquet")
        ),
        "results/summary.md",
        "results/diagnosis.parquet",
        "results/report.html",
    }
    assert changed - dependants == {ANSWERS, JUDGEMENTS, SUMMARY}
    for sibling in (
        f"{shard0}/memory/manifest.json",
        f"{shard0}/ingest.ledger.json",
        "results/synthetic/bm25_message/qa/step0/shard1/answers.parquet",
        "results/synthetic/bm25_message/qa/step0/shard1/judgements.parquet",
        f"{shard1}/answers.parquet",
        "results/synthetic/none/qa/step1/shard0/judgements.parquet",
    ):
        assert str(sibling) not in changed
    assert verify(wd / "results")[0] == []
