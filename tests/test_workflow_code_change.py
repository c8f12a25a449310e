"""Code-aware reruns, on a copy of the repository whose package code the tests edit.

A change to the code a job runs re-runs that job and what depends on it, and nothing else; a
comment is not a change; a re-run job gets its model calls from the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflow import REPO, copy_run, ledgers, planned_outputs

pytestmark = pytest.mark.slow

COPY_IGNORE = shutil.ignore_patterns(
    ".git", "results", ".snakemake", "__pycache__", ".venv", "*.egg-info", ".*_cache"
)


def snakemake_in(repo: Path, workdir: Path, *args: str) -> str:
    """Run the Snakefile of ``repo`` with ``repo``'s package first on the path (and as the
    working directory: ``python -m`` puts the working directory before PYTHONPATH)."""
    command = [
        sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory",
        str(workdir), "--cores", "2", "--configfile", str(repo / "tests/configs/tiny.yaml"), *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(repo)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=repo)
    if result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result.stdout + result.stderr


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: {old!r} not found once"
    path.write_text(text.replace(old, new))


def ledger_texts(workdir: Path) -> dict[str, str]:
    return {str(p.relative_to(workdir)): p.read_text() for p in workdir.glob("results/**/*.json")}


@pytest.fixture(scope="module")
def finished(tiny_run, tmp_path_factory):
    """A copy of the repository and a copy of the session's finished tiny run (conftest.tiny_run).

    The run was made by the repository's own code, which the copy holds unchanged: the code
    fingerprints are of the code, not of its path, so the copy finds the run up to date, and
    each test's edit is the only change it sees (the first test's "Nothing to be done" after
    comment edits also shows that the copy found the run up to date).
    """
    repo = tmp_path_factory.mktemp("repo") / "mnemoflow"
    shutil.copytree(REPO, repo, ignore=COPY_IGNORE)
    workdir = copy_run(tiny_run, tmp_path_factory.mktemp("run") / "wd")
    # The report records where it was made (versions.json: the git commit; the copy is no
    # checkout): made again by the copy, every JSON file under results/ is the copy's own.
    snakemake_in(repo, workdir, "--forcerun", "report")
    return repo, workdir


def test_comments_and_docstrings_re_run_nothing(finished):
    repo, workdir = finished
    edit(
        repo / "mnemoflow/eval/static_qa/scoring.py",
        '    answer["level"] = "answer"\n',
        '    answer["level"] = "answer"  # a comment is not code\n',
    )
    edit(
        repo / "mnemoflow/memory/systems/bm25.py",
        '        """(id, text, source turn ids, time) of every retrievable document."""',
        '        """Every retrievable document: (id, text, source turn ids, time)."""',
    )
    log = snakemake_in(repo, workdir, "--dry-run")
    assert "Nothing to be done" in log, [line for line in log.splitlines() if "reason" in line]


def test_a_metric_change_re_runs_scoring_and_makes_no_model_call(finished):
    repo, workdir = finished
    before = ledger_texts(workdir)
    assert sum(name.endswith("ingest.ledger.json") for name in before) == 8
    edit(
        repo / "mnemoflow/eval/static_qa/scoring.py",
        "    return out[QUESTION_SCORES.names].reset_index(drop=True)\n",
        "    out = out.copy()\n    return out[QUESTION_SCORES.names].reset_index(drop=True)\n",
    )
    planned = planned_outputs(snakemake_in(repo, workdir, "--dry-run"))
    # 2 systems x 2 steps of scores, then the summary and the report; no model-calling job.
    assert sum(o.endswith("/scores.parquet") for o in planned) == 4
    assert "results/summary.parquet" in planned and "results/report.html" in planned
    model_jobs = ("/memory", "answers.parquet", "judgements.parquet")
    assert not [o for o in planned if o.endswith(model_jobs)]
    snakemake_in(repo, workdir)
    after = ledger_texts(workdir)
    # the dossier names the code behind the numbers: the scoring code's fingerprint moved
    dossier = "results/report/dossier.json"
    code_after, code_before = (json.loads(d.pop(dossier))["code"] for d in (after, before))
    assert code_after["fingerprints"] != code_before["fingerprints"]
    assert after == before  # no ingest, answer or judge job ran: no new call


def test_a_reader_change_re_runs_answering_from_the_cache(finished):
    repo, workdir = finished
    edit(
        repo / "mnemoflow/agents/readers.py",
        "    return list(dict.fromkeys(s for item in items for s in item.source_ids))\n",
        "    ids = (s for item in items for s in item.source_ids)\n"
        "    return list(dict.fromkeys(ids))\n",
    )
    planned = planned_outputs(snakemake_in(repo, workdir, "--dry-run"))
    assert sum(o.endswith("answers.parquet") for o in planned) == 8
    assert not [o for o in planned if o.endswith("/memory")]  # ingestion does not read answers
    snakemake_in(repo, workdir)
    for name in ("answers.ledger.json", "judgements.ledger.json"):
        for ledger in ledgers(workdir, name):
            totals = ledger["totals"]
            assert totals["calls"] > 0 and totals["cache_hits"] == totals["calls"], ledger
