"""The results layout and the run's grid (mnemoflow/layout.py): paths built and parsed by one
owner, and the jobs the rules target are the jobs the planner expects."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

import pytest
import yaml

from mnemoflow import layout
from mnemoflow.environment.knobs import resolved_benchmarks
from mnemoflow.planning.grid import run_units
from mnemoflow.repeats import folders

PACKAGE = Path(__file__).resolve().parents[1] / "mnemoflow"
KEYS = {"repeat": "", "benchmark": "b", "system": "s", "protocol": "qa", "step": 1, "shard": 0}


def test_a_folder_and_its_ledger_and_back():
    assert layout.folder(KEYS) == "results/b/s/qa/step1/shard0"
    assert layout.folder({**KEYS, "shard": None}) == "results/b/s/qa/step1"
    assert layout.ledger("answer", KEYS) == "results/b/s/qa/step1/shard0/answers.ledger.json"
    seeded = {**KEYS, "repeat": "seed14/", "protocol": "on_policy", "shard": None}
    assert (
        layout.ledger("feedback_step", seeded)
        == "results/seed14/b/s/on_policy/step1/step.ledger.json"
    )
    assert layout.parse(layout.ledger("answer", KEYS)) == KEYS
    assert layout.parse(f"/x/y/{layout.ledger('feedback_step', seeded)}") == seeded
    assert layout.parse("results/summary.parquet") is None


def test_outputs_name_a_rules_files_and_folders():
    shard = "results/{repeat}{benchmark}/{system}/qa/step{step}/shard{shard}"
    assert layout.output_patterns("ingest") == {
        "snapshot": f"{shard}/memory",
        "ledger": f"{shard}/ingest.ledger.json",
    }
    assert "snapshot" in layout.DIRECTORIES
    user = layout.outputs("generate_user", {"benchmark": "g", "user": 2})
    assert user == {
        "user": "results/g/environment/users/2.json",
        "ledger": "results/g/environment/users/2.ledger.json",
    }


def test_a_seed_and_an_export_name_from_the_layout():
    assert layout.path_seed("/tmp/results/seed7/b/s/qa/step1/normalized.parquet") == 7
    assert layout.path_seed("results/b/s/qa/step0/scores.parquet") is None
    assert layout.export_name(KEYS) == "b.s.qa.step1"


def _literals(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module as written (f-strings whole), docstrings left out."""
    source = path.read_text(encoding="utf-8")
    docs = {
        (node.lineno, node.col_offset)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [
        (token.start[0], token.string)
        for token in tokens
        if token.type == tokenize.STRING and token.start not in docs
    ]


def test_a_jobs_log_mirrors_its_outputs_folder_and_the_rules_spell_no_step_folder():
    """A job's log sits under results/logs/ in its outputs' folder; the rules take it from the
    layout instead of spelling step and shard folders again."""
    assert layout.log(layout.SHARD, "ingest") == (
        "results/logs/{repeat}{benchmark}/{system}/qa/step{step}/shard{shard}/ingest.log"
    )
    assert layout.fill(layout.log(layout.RUN_STEP, "step"), KEYS) == (
        "results/logs/b/s/qa/step1/step.log"
    )
    with pytest.raises(ValueError, match="not a results pattern"):
        layout.log("elsewhere/{step}", "x")
    rules = PACKAGE.parent / "rules"
    spelled = [
        f"{path.name}:{number}"
        for path in sorted(rules.glob("*.smk"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"step\{\{|shard\{\{", line)
    ]
    assert not spelled, spelled


def test_no_results_path_is_built_outside_the_layout():
    """Outside mnemoflow/layout.py no string literal of the package spells a step or shard
    folder or a path under results/ (the CLI's ``--results results`` default names no path)."""
    pattern = re.compile(r"step\{|shard\{|results/")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "layout.py"
        for line, text in _literals(path)
        if pattern.search(text)
    ]
    assert not offenders, "\n".join(offenders)


# --- the grid: the rules' jobs are the planner's -------------------------------------------------


def _merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


#: Every family on the default config (static QA, feedback, interactive with replay, an
#: environment generated with a model), twice (repeats) and with a judge panel.
OVERRIDE = {
    "repeats": 2,
    "judge": {
        "panel": [
            {"name": "a", "kind": "generic", "model": {"backend": "offline"}},
            {"name": "b", "kind": "generic", "model": {"backend": "offline"}},
        ]
    },
}


def _dry_run_jobs(log: str) -> Counter:
    """(rule, sorted outputs) of every job a dry run lists."""
    jobs = Counter()
    for block in re.split(r"\n\[[^\]]+\]\n", log)[1:]:
        rule = re.match(r"(?:local)?rule (\w+):", block).group(1)
        out = re.search(r"output: ([^\n]*)", block)
        files = sorted(p.strip() for p in out.group(1).split(",")) if out else []
        jobs[(rule, tuple(files))] += 1
    return jobs


def _unit_jobs(units) -> Counter:
    jobs = Counter()
    for unit in units:
        files = []
        for value in unit.outputs.values():
            files += value if isinstance(value, list) else [value]
        jobs[(unit.rule, tuple(sorted(files)))] += 1
    return jobs


@pytest.mark.slow
def test_the_dry_runs_jobs_are_the_grids_units_and_the_planners(tmp_path):
    from mnemoflow.planning.run import QA_RULES, plan_run
    from tests.workflow import REPO, snakemake, workdir

    wd = workdir(tmp_path)
    (wd / "override.yaml").write_text(yaml.safe_dump(OVERRIDE))
    log = snakemake(wd, "-n", configfiles=(wd / "config.yaml", wd / "override.yaml"))
    ran = _dry_run_jobs(log)
    ran.pop(("all", ()), None)
    config = _merged(yaml.safe_load((REPO / "config.yaml").read_text()), OVERRIDE)
    benchmarks = resolved_benchmarks(config["benchmarks"])
    units = run_units(config, benchmarks, folders(config["seed"], 2), panel=True)
    assert _unit_jobs(units) == ran
    assert {rule for rule, _ in ran} >= {"ingest", "dialogues", "replay_dialogues", "judge_panel"}
    assert {rule for rule, _ in ran} >= {"feedback_step", "generate_user", "score_interactive"}
    # the parse-time plan (no dry run) expects the same static QA and panel jobs
    plan = plan_run(config, wd, priced_only=True)
    for rule in (*QA_RULES, "judge_panel", "judge_probe"):
        assert plan.jobs[rule] == sum(n for (r, _), n in ran.items() if r == rule), rule


def test_a_replay_only_run_lists_its_source_systems_dialogues_but_does_not_score_them():
    """interactive_replay alone, replaying a system the benchmark does not run: the source's
    on-policy dialogues are jobs of the run (the planner counts them), never a scored step."""
    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config.yaml").read_text())
    spec = dict(config["benchmarks"]["amemgym_procedural"])
    spec.update(protocols=["interactive_replay"], systems=["rag"])
    config["run"]["benchmarks"] = ["amemgym_procedural"]
    config["benchmarks"] = {"amemgym_procedural": spec}
    units = run_units(config, resolved_benchmarks(config["benchmarks"]))
    by_rule = Counter((u.rule, u.keys.get("system"), u.keys.get("protocol")) for u in units)
    steps = spec["generate"]["periods"] + 1
    assert by_rule[("dialogues", "native", "interactive")] == steps
    assert by_rule[("replay_dialogues", "rag", "interactive_replay")] == steps
    scored = layout.run_steps(units)
    assert {(k["system"], k["protocol"]) for k in scored} == {("rag", "interactive_replay")}


def test_the_rules_helpers_stay_queries():
    """rules/common.smk holds one-line lookups of the layout, the grid and the library: it stays
    under 550 lines (logic that grows there belongs in the package)."""
    common = Path(__file__).resolve().parents[1] / "rules" / "common.smk"
    lines = common.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 550, len(lines)
