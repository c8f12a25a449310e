"""The jobs package's one calling convention: files by the rule's own names, run keys from the
wildcards, the model environment, and the rule's params — checked without Snakemake."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from mnemoflow import jobs
from mnemoflow.data.validate import DataError
from mnemoflow.jobs import context, interactive
from mnemoflow.jobs.context import JobEnv, RunKeys, files_of

ROOT = Path(__file__).resolve().parents[1]
JOB_MODULES = ("data", "static_qa", "panel", "feedback", "interactive", "environment", "summary")


class Named(dict):
    """Snakemake's input / output / params / wildcards: items by name, also as attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def rule(*, input=(), output=(), params=(), wildcards=(), log="-", config=None):
    return SimpleNamespace(
        input=Named(input),
        output=Named(output),
        params=Named(params),
        wildcards=Named(wildcards),
        log=[None if log == "-" else log],
        config=config or {},
    )


@dataclass(frozen=True)
class ExampleFiles:
    table: str
    previous: str | None
    shards: list[str]
    out: str
    source: str | None = None


def test_files_take_the_rules_own_names_lists_and_optional_inputs():
    smk = rule(
        input={"table": "a.parquet", "previous": [], "shards": ["s0", "s1"]},
        output={"out": "b.parquet"},
    )
    assert files_of(ExampleFiles, smk) == ExampleFiles(
        table="a.parquet", previous=None, shards=["s0", "s1"], out="b.parquet", source=None
    )
    smk.input["previous"] = ["step0/memory"]
    assert files_of(ExampleFiles, smk).previous == "step0/memory"


def test_a_file_the_rule_lacks_or_names_twice_is_an_error():
    with pytest.raises(ValueError, match=r"ExampleFiles.out: not a file of the rule"):
        files_of(ExampleFiles, rule(input={"table": "a", "previous": [], "shards": []}))
    both = rule(input={"table": "a", "previous": [], "shards": [], "out": "x"}, output={"out": "y"})
    with pytest.raises(ValueError, match=r"ExampleFiles.out: both an input and an output"):
        files_of(ExampleFiles, both)


def test_run_keys_come_from_the_wildcards_and_give_the_tables_run_columns():
    keys = RunKeys.from_wildcards(
        Named(benchmark="locomo", system="bm25", protocol="qa", step="2", shard="1")
    )
    assert keys == RunKeys("locomo", "bm25", "qa", 2, 1)
    assert keys.row() == {"benchmark": "locomo", "system": "bm25", "protocol": "qa", "step": 2}
    static = RunKeys.from_wildcards(Named(benchmark="b", system="s", step="0", shard="0"))
    assert static.protocol == "qa"  # the static QA rules have no protocol wildcard


def test_run_hands_the_job_its_files_keys_env_and_params(tmp_path):
    seen = {}

    def job(files: ExampleFiles, run: RunKeys, env: JobEnv, *, system: dict) -> None:
        seen.update(files=files, run=run, env=env, system=system)

    smk = rule(
        input={"table": "t", "previous": [], "shards": []},
        output={"out": "o"},
        params={"system": {"type": "bm25"}, "models": {"agent": {}}, "seed": 3, "code": "abc"},
        wildcards={"benchmark": "b", "system": "s", "step": "1", "shard": "0"},
        log=str(tmp_path / "job.log"),
        config={"cache": "cache/dir"},
    )
    context.run(smk, job)
    assert seen["env"] == JobEnv(models={"agent": {}}, limits=None, cache="cache/dir", seed=3)
    assert seen["run"].step == 1 and seen["system"] == {"type": "bm25"}
    assert seen["files"].out == "o"


def test_a_param_the_job_does_not_take_is_an_error(tmp_path, capsys):
    def job(files: ExampleFiles) -> None:
        raise AssertionError("not reached")

    smk = rule(
        input={"table": "t", "previous": [], "shards": []},
        output={"out": "o"},
        params={"kind": "qa"},
        log=str(tmp_path / "job.log"),
    )
    with pytest.raises(SystemExit):
        context.run(smk, job)
    line = capsys.readouterr().err.strip()
    assert line == (
        "TypeError: tests.test_jobs.job: params it does not take ['kind'] "
        f"(traceback: {tmp_path / 'job.log'})"
    )


def test_a_failed_job_says_one_line_and_logs_its_traceback(tmp_path, capsys):
    """The console gets the error's one line (a DataError names file, record and field), the
    job's log the traceback."""

    def job(files: ExampleFiles) -> None:
        raise DataError("locomo10.json: record 3 (conv-30) qa[17]: missing field 'answer'")

    log = tmp_path / "job.log"
    smk = rule(input={"table": "t", "previous": [], "shards": []}, output={"out": "o"},
               log=str(log))  # fmt: skip
    with pytest.raises(SystemExit) as info:
        context.run(smk, job)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        f"locomo10.json: record 3 (conv-30) qa[17]: missing field 'answer' (traceback: {log})\n"
    )
    logged = log.read_text()
    assert "job failed" in logged and "Traceback (most recent call last)" in logged


def _jobs():
    import importlib

    for name in JOB_MODULES:
        module = importlib.import_module(f"mnemoflow.jobs.{name}")
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            public = fn.__module__ == module.__name__ and not fn_name.startswith("_")
            if public and "files" in inspect.signature(fn).parameters:
                yield f"{name}.{fn_name}", fn


def test_no_job_takes_more_than_eight_parameters():
    found = dict(_jobs())
    assert len(found) == 19  # one per script
    assert {name: len(inspect.signature(fn).parameters) for name, fn in found.items()
            if len(inspect.signature(fn).parameters) > 8} == {}  # fmt: skip


def test_every_script_is_one_call_of_a_job():
    jobs_by_name = dict(_jobs())
    for path in sorted((ROOT / "scripts").glob("*.py")):
        tree = ast.parse(path.read_text())
        body = [node for node in tree.body if not isinstance(node, ast.Expr | ast.ImportFrom)]
        calls = [node for node in tree.body if isinstance(node, ast.Expr)][
            1:
        ]  # after the docstring
        assert body == [] and len(calls) == 1, path.name
        call = calls[0].value
        assert isinstance(call, ast.Call) and call.func.id == "run", path.name
        target = call.args[1]
        assert f"{target.value.id}.{target.attr}" in jobs_by_name, path.name


def test_the_rules_import_nothing_from_the_jobs_package():
    for path in [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]:
        imports = [
            line
            for line in path.read_text().splitlines()
            if line.startswith(("from mnemoflow", "import mnemoflow"))
        ]
        assert not [line for line in imports if "mnemoflow.jobs" in line], path.name


def test_the_package_names_its_entry_point():
    assert jobs.run is context.run


def test_a_scoring_job_writes_exactly_the_steps_its_rule_declares():
    steps = [{"scores": "a/step0/scores.parquet"}, {"scores": "a/step1/scores.parquet"}]
    declared = {"scores": ["a/step1/scores.parquet", "a/step0/scores.parquet"]}
    assert interactive.steps_writing(steps, declared) == steps
    drifted = {"scores": ["a/step0/scores.parquet", "b/step0/scores.parquet"]}
    with pytest.raises(ValueError, match=r"missing \['b/step0/scores.parquet'\]"):
        interactive.steps_writing(steps, drifted)


def test_a_failure_while_scoring_names_its_step():
    with pytest.raises(KeyError) as raised:
        with interactive.naming_step("results/b/s/qa/step1/scores.parquet"):
            raise KeyError("value")
    assert raised.value.__notes__ == [
        "while scoring the step of results/b/s/qa/step1/scores.parquet"
    ]
