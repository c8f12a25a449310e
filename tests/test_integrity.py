"""Corrupt outputs: the parse-time sweep, the quarantine, the ledgers' outputs and `verify`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from mnemoflow.cli import main
from mnemoflow.data import integrity
from mnemoflow.data.integrity import check_parquet, record_outputs, sweep, verify
from mnemoflow.data.tables import TableError, read_table, write_atomic_text, write_table

JUDGED = {
    "benchmark": ["b", "b"],
    "system": ["s", "s"],
    "protocol": ["qa", "qa"],
    "step": [0, 0],
    "question_id": ["q1", "q2"],
    "question_type": ["t", "t"],
    "judge": ["offline", "offline"],
    "metric": ["accuracy", "accuracy"],
    "value": [1.0, 0.0],
    "raw_reply": ["yes", "no"],
    "parse_ok": [True, True],
}


def judgements(path: Path, values=(1.0, 0.0)) -> Path:
    return write_table(pd.DataFrame({**JUDGED, "value": list(values)}), path, "judgements")


def truncate(path: Path, keep_mtime: bool = True) -> None:
    """Cut a file to half its bytes, as a full disk or a killed copy leaves it."""
    stat = path.stat()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def run_dir(tmp_path, monkeypatch) -> Path:
    """A working directory with results/ holding two shards' judgements and a summary."""
    monkeypatch.chdir(tmp_path)
    for shard in (0, 1):
        judgements(tmp_path / f"results/b/s/qa/step0/shard{shard}/judgements.parquet")
    write_atomic_text(tmp_path / "results/b/s/qa/step0/shard0/judgements.ledger.json", "{}\n")
    return tmp_path


def test_check_parquet_reads_the_footer_and_the_named_schema(tmp_path):
    good = judgements(tmp_path / "judgements.parquet")
    assert check_parquet(good) is None
    truncate(good)
    assert "not a readable Parquet file" in check_parquet(good)
    # a name that fixes the schema: other columns are a problem; an unnamed table is not checked
    other = pd.DataFrame({"x": [1]})
    write_table(other, tmp_path / "answers.parquet", pa.schema([("x", "int64")]))
    assert "are not the answers table's" in check_parquet(tmp_path / "answers.parquet")
    write_table(other, tmp_path / "scores.parquet", pa.schema([("x", "int64")]))
    assert check_parquet(tmp_path / "scores.parquet") is None


def test_read_table_names_an_unreadable_file_in_one_line(tmp_path):
    path = judgements(tmp_path / "judgements.parquet")
    truncate(path)
    with pytest.raises(TableError) as caught:
        read_table(path, "judgements")
    message = str(caught.value)
    assert message.startswith(f"{path}: not a readable Parquet table") and "\n" not in message
    assert "results/quarantine/" in message


def test_sweep_moves_only_the_bad_file_keeping_its_path(run_dir):
    bad = Path("results/b/s/qa/step0/shard0/judgements.parquet")
    sibling = Path("results/b/s/qa/step0/shard1/judgements.parquet")
    ledger = Path("results/b/s/qa/step0/shard0/judgements.ledger.json")
    kept = {p: fingerprint(p) for p in (sibling, ledger)}
    truncate(bad)
    lines = sweep()
    assert len(lines) == 1 and lines[0].startswith(f"{bad}: not a readable Parquet file")
    assert not bad.exists()
    moved = Path("results/quarantine/b/s/qa/step0/shard0/judgements.parquet")
    assert moved.is_file() and "moved to " + str(moved) in lines[0]
    assert {p: fingerprint(p) for p in kept} == kept
    # a second bad copy of the same file does not overwrite the first one in the quarantine
    judgements(bad)
    truncate(bad)
    sweep()
    assert len(list(moved.parent.glob("judgements.parquet*"))) == 2


def test_sweep_checks_only_files_changed_since_they_passed(run_dir, monkeypatch):
    assert sweep() == []
    checked = []
    real = integrity.check_file
    monkeypatch.setattr(integrity, "check_file", lambda path: checked.append(path) or real(path))
    assert sweep() == []
    assert checked == []  # nothing changed: a stat per file, no footer read
    bad = Path("results/b/s/qa/step0/shard1/judgements.parquet")
    truncate(bad, keep_mtime=True)  # the size changed, so it is read again
    assert len(sweep()) == 1 and checked == [bad]


def test_a_bad_ledger_is_moved_and_the_cache_and_logs_are_not_swept(run_dir):
    ledger = Path("results/b/s/qa/step0/shard0/judgements.ledger.json")
    ledger.write_text('{"calls": ', encoding="utf-8")
    for skipped in ("results/cache/x.parquet", "results/logs/y.parquet"):
        Path(skipped).parent.mkdir(parents=True, exist_ok=True)
        Path(skipped).write_bytes(b"not parquet")
    lines = sweep()
    assert [line.split(":")[0] for line in lines] == [str(ledger)]
    assert Path("results/cache/x.parquet").exists() and Path("results/logs/y.parquet").exists()


def test_a_bad_file_inside_a_directory_output_moves_the_directory(run_dir):
    snapshot = Path("results/b/s/qa/step0/shard0/memory")
    (snapshot / "u1").mkdir(parents=True)
    (snapshot / ".snakemake_timestamp").touch()
    judgements(snapshot / "u1/judgements.parquet")
    truncate(snapshot / "u1/judgements.parquet")
    sweep()
    assert not snapshot.exists()
    assert Path("results/quarantine/b/s/qa/step0/shard0/memory/u1/judgements.parquet").exists()


def test_nothing_moves_while_another_snakemake_holds_the_directory(run_dir):
    bad = Path("results/b/s/qa/step0/shard0/judgements.parquet")
    truncate(bad)
    Path(".snakemake/locks").mkdir(parents=True)
    Path(".snakemake/locks/0.input.lock").touch()
    lines = sweep()
    assert bad.exists() and "not moved: another Snakemake holds" in lines[0]


def test_verify_finds_a_table_changed_with_its_mtime_kept(run_dir, capsys):
    folder = Path("results/b/s/qa/step0/shard0")
    table, ledger = folder / "judgements.parquet", folder / "judgements.ledger.json"
    record_outputs(ledger, [table, ledger, folder / "memory"])
    outputs = json.loads(ledger.read_text())["outputs"]
    assert list(outputs) == ["judgements.parquet"]
    assert outputs["judgements.parquet"]["bytes"] == table.stat().st_size
    assert verify("results") == ([], 3)
    # a whole, readable table with other values, size and mtime kept: only the digest tells
    stat = table.stat()
    judgements(table, values=(0.0, 1.0))
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert table.stat().st_size == stat.st_size and check_parquet(table) is None
    problems, _ = verify("results")
    assert [(p.path, p.reason) for p in problems] == [
        (table, f"sha256 differs from the one {ledger} recorded")
    ]
    # a table no ledger lists: the footer check
    unlisted = Path("results/b/s/qa/step0/shard1/judgements.parquet")
    truncate(unlisted)
    assert main(["verify", "results", "--quarantine"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "3 files checked, 2 bad"
    assert not table.exists() and not unlisted.exists()
    assert Path("results/quarantine/b/s/qa/step0/shard1/judgements.parquet").exists()
    assert main(["verify"]) == 0


def test_verify_reports_a_truncated_listed_file_by_size(run_dir):
    folder = Path("results/b/s/qa/step0/shard0")
    record_outputs(folder / "judgements.ledger.json", [folder / "judgements.parquet"])
    truncate(folder / "judgements.parquet", keep_mtime=True)
    problems, _ = verify("results")
    assert len(problems) == 1 and "bytes, " in problems[0].reason
