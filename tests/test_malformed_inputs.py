"""The malformed-input corpus: every file in tests/malformed/ fails the way a person can act on.

Each case is one small file (``ok_*`` files are the valid companions a case needs) run through the
user's own path: ``mnemoflow data prepare`` for the loaders, ``mnemoflow score`` for predictions
and retrieval logs, and ``snakemake`` for the workflow config. Every case asserts

- a non-zero exit;
- exactly one line of error output that names the file, the record and the field (for config,
  the key path ``systems.<name>.<key>`` / ``models.<role>.<key>`` is the record and field);
- no output that looks finished: no Parquet table written anywhere under the output folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mnemoflow.cli import main
from tests.shared_data import shared_file
from tests.workflow import REPO, TINY

CORPUS = Path(__file__).resolve().parent / "malformed"

#: file -> (command, the one-line message expected in full). Loaders: mnemoflow data prepare.
LOADER_CASES = {
    "locomo_truncated.json": (
        "locomo",
        "locomo_truncated.json: truncated JSON: record 0 is incomplete",
    ),
    "locomo_category_out_of_range.json": (
        "locomo",
        "locomo_category_out_of_range.json: record 0 (conv-x) qa[0]: 'category' must be 1-5, got 7",
    ),
    "locomo_missing_question.json": (
        "locomo",
        "locomo_missing_question.json: record 0 (conv-x) qa[0]: missing field 'question'",
    ),
    "locomo_category_string.json": (
        "locomo",
        "locomo_category_string.json: record 0 (conv-x) qa[0]: 'category' must be an integer, "
        "got string '4'",
    ),
    "locomo_top_level_object.json": (
        "locomo",
        "locomo_top_level_object.json: expected a JSON array at the top level, found '{'",
    ),
    "locomo_turn_text_number.json": (
        "locomo",
        "locomo_turn_text_number.json: record 0 (conv-x) conversation.session_1[1]: 'text' must "
        "be a string, got int 5",
    ),
    "locomo_turn_without_dia_id.json": (
        "locomo",
        "locomo_turn_without_dia_id.json: record 0 (conv-x) conversation.session_1[0]: missing "
        "field 'dia_id'",
    ),
    "locomo_qa_without_answer.json": (
        "locomo",
        "locomo_qa_without_answer.json: record 0 (conv-x) qa[0]: missing field 'answer'",
    ),
    "locomo_adversarial_without_adversarial_answer.json": (
        "locomo",
        "locomo_adversarial_without_adversarial_answer.json: record 0 (conv-x) qa[0]: missing "
        "field 'adversarial_answer'",
    ),
    "locomo_session_without_date.json": (
        "locomo",
        "locomo_session_without_date.json: record 0 (conv-x) conversation: missing field "
        "'session_1_date_time'",
    ),
    "lme_answer_list.json": (
        "longmemeval",
        "lme_answer_list.json: record 1 (gpt4_59c863d7): 'answer' must be a string or an "
        "integer or a number, got list [2]",
    ),
    "lme_missing_dates.json": (
        "longmemeval",
        "lme_missing_dates.json: record 0 (e47becba): missing field 'haystack_dates'",
    ),
    "lme_role_system.json": (
        "longmemeval",
        "lme_role_system.json: record 0 (e47becba) haystack_sessions[1][0]: 'role' must "
        "be user or assistant, got 'system'",
    ),
    "lme_has_answer_string.json": (
        "longmemeval",
        "lme_has_answer_string.json: record 0 (e47becba) haystack_sessions[1][0]: "
        "'has_answer' must be true/false, got string 'yes'",
    ),
    "lme_truncated.json": (
        "longmemeval",
        "lme_truncated.json: truncated JSON: record 1 is incomplete",
    ),
    "lme_dates_sessions_mismatch.json": (
        "longmemeval",
        "lme_dates_sessions_mismatch.json: record 0 (e47becba): haystack_dates (1), "
        "haystack_session_ids (2) and haystack_sessions (2) must have the same length",
    ),
    "memorybench_invalid_json_line.jsonl": (
        "memorybench",
        "memorybench_invalid_json_line.jsonl: record 2: invalid JSON: Expecting value",
    ),
    "memorybench_missing_answer.jsonl": (
        "memorybench",
        "memorybench_missing_answer.jsonl: record 1: missing field 'answer'",
    ),
    "memorybench_instruction_list.jsonl": (
        "memorybench",
        "memorybench_instruction_list.jsonl: record 2: 'instruction' must be a string, got list "
        "['Explain']",
    ),
    "amemgym_state_string.json": (
        "amemgym",
        "amemgym_state_string.json: record 0 (u-1) qas[0].answer_choices[1]: 'state' must be a "
        "list, got string 'keto'",
    ),
    "amemgym_missing_query.json": (
        "amemgym",
        "amemgym_missing_query.json: record 0 (u-1) qas[0]: missing field 'query'",
    ),
    "amemgym_truncated.json": (
        "amemgym",
        "amemgym_truncated.json: truncated JSON: record 0 is incomplete",
    ),
    "amemgym_periods_not_a_list.json": (
        "amemgym",
        "amemgym_periods_not_a_list.json: record 0 (u-1): 'periods' must be a list, got object {}",
    ),
    "amemgym_choices_not_a_list.json": (
        "amemgym",
        "amemgym_choices_not_a_list.json: record 0 (u-1) qas[0]: 'answer_choices' must be a list, "
        "got string 'Chickpea curry'",
    ),
}

#: file -> the one-line message of ``mnemoflow score`` on ok_longmemeval.json.
SCORE_CASES = {
    "predictions_missing_hypothesis.jsonl": (
        "predictions_missing_hypothesis.jsonl: line 2: missing field 'hypothesis'"
    ),
    "predictions_invalid_json.jsonl": "predictions_invalid_json.jsonl: line 2: not valid JSON",
    "predictions_unknown_question.jsonl": (
        "predictions_unknown_question.jsonl: line 2: question_id 'nope_42' is not in the "
        "benchmark data"
    ),
    "predictions_hypothesis_number.jsonl": (
        "predictions_hypothesis_number.jsonl: line 1 (e47becba): 'hypothesis' must be a string"
    ),
    "predictions_repeated_question.jsonl": (
        "predictions_repeated_question.jsonl: line 2: question_id 'e47becba' repeats line 1"
    ),
    "retrievals_missing_ranked_items.jsonl": (
        "retrievals_missing_ranked_items.jsonl: line 2 (gpt4_59c863d7): missing field "
        "'retrieval_results.ranked_items'"
    ),
    "retrievals_unknown_question.jsonl": (
        "retrievals_unknown_question.jsonl: line 1: question_id 'nope_42' is not in the "
        "benchmark data"
    ),
}

#: config override -> the one-line message snakemake prints before any job runs.
CONFIG_CASES = {
    "config_unknown_system_type.yaml": (
        "config systems.weird.type: unknown memory system 'nosuch_memory'; available: ["
    ),
    "config_bad_parameter_type.yaml": (
        "systems.bm25_message.top_k: 'five' is not of type 'integer'"
    ),
    "config_bad_temperature_type.yaml": "config models.agent.temperature: 'hot' is not of type "
    "'number'",
    "config_role_without_model.yaml": (
        "config models.judge.model: required for the openai backend"
    ),
    "config_base_url_with_token.yaml": (
        "config models.judge.base_url: holds a query parameter other than api-version"
    ),
    "config_endpoint_url_with_user_info.yaml": (
        "config endpoints.gw.base_url: holds user info (user:password@)"
    ),
    "config_missing_key_variable.yaml": (
        "config models.judge.api_key_env: environment variable MNEMOFLOW_MALFORMED_NO_SUCH_KEY "
        "is not set"
    ),
    "config_unknown_benchmark_in_run.yaml": (
        "config run.benchmarks: 'nosuch_benchmark' is not defined under benchmarks"
    ),
}


#: config override -> the one-line message of a dry run, raised while the Snakefile is parsed
#: (rules/common.smk), before any job: the same check runs for `mnemoflow plan` and `run`.
PARSE_CASES = {
    "config_base_url_not_a_url.yaml": (
        "config models.judge.base_url: an http(s) address without spaces, got 'not a url'"
    ),
    "config_base_url_without_scheme.yaml": (
        "config models.judge.base_url: an http(s) address (no scheme), got 'localhost:8000/v1'; "
        "e.g. http://localhost:8000/v1"
    ),
    "config_base_url_ftp.yaml": (
        "config models.judge.base_url: an http(s) address, got scheme 'ftp' in "
        "'ftp://models.example.org/v1'"
    ),
    "config_endpoint_base_url_without_host.yaml": (
        "config endpoints.site.base_url: an http(s) address with a host, got 'https:///v1'"
    ),
    "config_unknown_loader.yaml": (
        "config benchmarks.mine.loader: unknown benchmark loader 'nosuch_loader'; available: ["
    ),
    "config_missing_locomo_file.yaml": (
        "config benchmarks.locomo: source.path nowhere/locomo10.json does not exist; place the "
        "file there"
    ),
    "config_param_type.yaml": "config benchmarks.synthetic.params.users: an integer, got 'two'",
    "config_offline_role_with_base_url.yaml": (
        "config models.judge: backend offline runs the embedded heuristic and calls no server, "
        "yet base_url is given; drop backend: offline to call it, or base_url to run offline"
    ),
}

#: config file -> the one line of `mnemoflow plan` / `mnemoflow run`, which read every config
#: file before Snakemake does (Snakemake's own message names neither the file nor the line).
CONFIG_FILE_CASES = {
    "config_yaml_syntax_error.yaml": "config_yaml_syntax_error.yaml: line 3, column 10: YAML "
    "syntax error: expected ',' or ']', but got ':'",
    "config_not_utf8.yaml": "config_not_utf8.yaml: not UTF-8: byte 0xe9 at offset 136 (line 4)",
}


def test_the_corpus_is_complete():
    """Every file is a case (or an ok_ companion) and every case has its file: >= 25 cases."""
    cases = {**LOADER_CASES, **SCORE_CASES, **CONFIG_CASES, **PARSE_CASES, **CONFIG_FILE_CASES}
    files = {p.name for p in CORPUS.iterdir() if not p.name.startswith("ok_")}
    assert files == set(cases)
    assert len(cases) >= 25
    loaders = {command for command, _ in LOADER_CASES.values()}
    assert loaders == {"locomo", "longmemeval", "memorybench", "amemgym"}


def _parquet(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.parquet")) if folder.exists() else []


def _one_error_line(err: str, message: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert message in lines[0]


@pytest.mark.parametrize("name", sorted(LOADER_CASES))
def test_loader_input(tmp_path, capsys, name):
    loader, message = LOADER_CASES[name]
    out = tmp_path / "out"
    args = ["data", "prepare", loader, "--path", str(CORPUS / name), "--out", str(out)]
    if loader == "memorybench":  # a raw file's split needs the registry's sample_count
        configs = shared_file("memorybench", "configs", "datasets")
        args += ["--select", "dataset=LexEval-QA", "--configs", str(configs)]
    assert main(args) == 2
    _one_error_line(capsys.readouterr().err, f"mnemoflow data: error: {message}")
    assert _parquet(tmp_path) == []


@pytest.mark.parametrize("name", sorted(SCORE_CASES))
def test_score_input(tmp_path, capsys, name):
    out = tmp_path / "out"
    predictions = name if name.startswith("predictions_") else "ok_predictions.jsonl"
    args = ["score", "--benchmark", "longmemeval", "--data", str(CORPUS / "ok_longmemeval.json"),
            "--predictions", str(CORPUS / predictions), "--out", str(out)]  # fmt: skip
    if name.startswith("retrievals_"):
        args += ["--retrievals", str(CORPUS / name)]
    assert main(args) == 2
    # score names the file by the path it was given
    _one_error_line(
        capsys.readouterr().err, f"mnemoflow score: error: {CORPUS}/{SCORE_CASES[name]}"
    )
    assert _parquet(tmp_path) == []


def test_the_companions_are_valid_and_the_exit_code_is_the_process_s(tmp_path):
    """The ok_ files score (so each case fails on its own defect); a bad one exits 2 for real."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    data = str(CORPUS / "ok_longmemeval.json")
    base = [sys.executable, "-m", "mnemoflow.cli", "score", "--benchmark", "longmemeval",
            "--data", data, "--out"]  # fmt: skip
    ok = subprocess.run(
        [*base, str(tmp_path / "ok"), "--predictions", str(CORPUS / "ok_predictions.jsonl")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok" / "judgements.parquet").exists()
    bad = subprocess.run(
        [*base, str(tmp_path / "bad"), "--predictions",
         str(CORPUS / "predictions_missing_hypothesis.jsonl")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2
    _one_error_line(bad.stderr, SCORE_CASES["predictions_missing_hypothesis.jsonl"])
    assert _parquet(tmp_path / "bad") == []


@pytest.mark.parametrize("name", sorted(CONFIG_CASES))
def test_workflow_config(tmp_path, name):
    """A real (not dry) run: the config fails at startup, before any job writes anything."""
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
               "--directory", str(tmp_path), "--cores", "1",
               "--configfile", str(TINY), str(CORPUS / name)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "MNEMOFLOW_MALFORMED_NO_SUCH_KEY"}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if CONFIG_CASES[name] in line]
    assert len(lines) == 1, output  # the message stands on one line, once
    assert "tok-malformed-corpus" not in output  # a refused credential is never quoted
    assert _parquet(tmp_path) == []
    assert not (tmp_path / "results").exists()


def _dry_run(tmp_path, *configfiles):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-n",
               "--directory", str(tmp_path), "--cores", "1",
               "--configfile", str(TINY), *map(str, configfiles)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


#: Two parse-time cases run in every test run; the others are marked slow (each of their checks
#: is also called directly by tests/test_startup_checks.py, in milliseconds).
FAST_PARSE_CASES = ("config_base_url_ftp.yaml", "config_missing_locomo_file.yaml")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name in FAST_PARSE_CASES else pytest.mark.slow)
        for name in sorted(PARSE_CASES)
    ],
)
def test_refused_when_the_snakefile_is_parsed(tmp_path, name):
    """A dry run fails in one line while rules/common.smk is parsed: no job is listed."""
    result = _dry_run(tmp_path, CORPUS / name)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if PARSE_CASES[name] in line]
    assert len(lines) == 1, output
    assert 'Error in file "' in output and "rules/common.smk" in output  # at parse time
    assert "rule " not in output and "Job stats" not in output  # no job was planned
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize("name", sorted(CONFIG_FILE_CASES))
def test_a_broken_config_file_is_named_with_its_line_or_byte(capsys, command, name):
    """Read before Snakemake starts (so no job either): the file and its line, or byte offset."""
    assert main([command, "--configfile", str(CORPUS / name)]) == 2
    err = capsys.readouterr().err
    _one_error_line(err, f"mnemoflow {command}: error: {CORPUS}/{CONFIG_FILE_CASES[name]}")


def test_a_data_error_inside_a_job_is_one_line_on_the_console(tmp_path):
    """The file exists (so the startup passes), its record is broken: the prepare job fails, the
    console gets the one line naming file, record and field, the job's log the traceback."""
    shutil.copy(CORPUS / "locomo_qa_without_answer.json", tmp_path / "conv.json")
    override = tmp_path / "locomo.yaml"
    override.write_text(
        "benchmarks: {locomo: {source: {path: conv.json, sha256: null}}}\n"
        "run: {benchmarks: [locomo], systems: [none]}\n"
    )
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
               "--directory", str(tmp_path), "--cores", "1",
               "results/locomo/prepared/questions.parquet",
               "--configfile", str(TINY), str(override)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    log = "results/logs/locomo/prepared/prepare.log"
    line = f"conv.json: record 0 (conv-x) qa[0]: missing field 'answer' (traceback: {log})"
    assert [x for x in output.splitlines() if "missing field 'answer'" in x] == [line], output
    assert "Traceback (most recent call last)" not in output
    assert "Traceback (most recent call last)" in (tmp_path / log).read_text()
    assert _parquet(tmp_path / "results") == []
