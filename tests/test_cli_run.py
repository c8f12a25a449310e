"""``mnemoflow run`` passes what it does not know to snakemake, as the docs' commands need."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mnemoflow import cli
from mnemoflow.commands import run as run_command


def test_run_hands_config_files_flags_and_targets_to_snakemake(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda command, cwd: calls.append(command) or 0)
    argv = ["run", "results/x/data.json", "--configfile", "configs/a.yaml", "-n"]
    assert cli.main(argv) == 0
    assert calls == [
        [sys.executable, "-m", "snakemake", "--cores", "all"]
        + ["results/x/data.json", "--configfile", "configs/a.yaml", "-n"]
    ]


def test_run_keeps_the_cores_the_user_gives():
    command = run_command.snakemake_command(["--cores", "2", "-n"])
    assert command == [sys.executable, "-m", "snakemake", "--cores", "2", "-n"]
    assert run_command.snakemake_command(["-c1"])[3:] == ["-c1"]


def test_other_commands_still_reject_unknown_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["metric", "--list", "--bogus"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
