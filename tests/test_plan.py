"""``mnemoflow plan`` and ``budget_usd``: a run priced before it starts, against its own ledgers.

The workflow test binds the agent and judge of a small static QA run (synthetic, one BM25 system,
two steps) to the local test server under a priced model name, plans it on an empty cache, runs
it, and compares the plan with what the ledgers then record; then plans the finished run forced
again (every call a cache hit, $0). Before the run, ``budget_usd`` below the plan refuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mnemoflow import cli
from mnemoflow.commands.plan import dry_run_jobs
from mnemoflow.llm.types import EndpointSpec
from mnemoflow.planning.budget import check_budget
from mnemoflow.planning.plan import Line, Plan
from mnemoflow.prices import price_table
from mnemoflow.testing.openai_server import OpenAITestServer
from tests.answering_model import answer
from tests.workflow import REPO, TINY, ledgers, snakemake, workdir

MODEL = "gpt-4o-mini"  # in the shipped price table


def test_dry_run_jobs_reads_rules_and_wildcards():
    log = (
        "rule ingest:\n    output: a\n    wildcards: benchmark=synthetic, system=none, step=0, "
        "shard=1\n    resources: tmpdir=/tmp\n\nlocalrule all:\n    input: b\n"
    )
    assert dry_run_jobs(log) == [
        ("ingest", {"benchmark": "synthetic", "system": "none", "step": "0", "shard": "1"}),
        ("all", {}),
    ]


def test_plan_json_has_the_ledger_totals_and_prices_by_role():
    specs = {
        "agent": EndpointSpec("agent", backend="openai", model=MODEL, base_url="http://x/v1"),
        "judge": EndpointSpec("judge"),
    }
    plan = Plan(specs, price_table())
    plan.jobs = {"answer": 2, "judge": 2}
    plan.latency = {"agent": (1.0, "plan.latency_s"), "judge": (0.0, "local")}
    plan.add(Line("b", "s", "qa", "agent", "answer", calls=10, tokens_in=1e6, tokens_out=1e5))
    plan.add(Line("b", "s", "qa", "agent", "answer", calls=10, cache_hits=10))
    plan.add(Line("b", "s", "qa", "judge", "judge_qa", calls=20, tokens_in=500))
    data = json.loads(plan.to_json())
    assert {"jobs", "calls", "cache_hits", "tokens_in", "tokens_out", "usd", "hours"} <= set(data)
    assert data["jobs"] == 4 and data["calls"] == 40 and data["cache_hits"] == 10
    assert set(data["by_role"]["agent"]) == {
        "calls",
        "cache_hits",
        "tokens_in",
        "tokens_out",
        "cached_in",
        "usd",
        "usd_batch",
    }
    # gpt-4o-mini through OpenAI's Batch API: half of $0.15 in, $0.60 out per million
    assert data["by_role"]["agent"]["usd_batch"] == pytest.approx((0.15 + 0.06) / 2)
    # gpt-4o-mini: $0.15 in, $0.60 out per million; the offline judge costs nothing
    assert data["by_role"]["agent"]["usd"] == pytest.approx(0.15 + 0.06)
    assert data["by_role"]["judge"]["usd"] == 0.0 and data["usd"] == pytest.approx(0.21)
    # 10 misses x 1 s / concurrency 8
    assert data["hours"] == pytest.approx(10 / 8 / 3600, abs=1e-4)
    assert "agent/answer" in plan.render()


def test_no_budget_plans_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_budget({"models": {}, "benchmarks": {"x": {"loader": "nope"}}})  # would fail if planned
    assert not (tmp_path / "results").exists()


def _plan(wd, override, *extra):
    out = subprocess.run(
        [sys.executable, "-m", "mnemoflow.cli", "plan", "--json", "--directory", str(wd),
         "--configfile", str(TINY), str(override), *extra],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _ledgers(wd):
    names = ("ingest.ledger.json", "answers.ledger.json", "judgements.ledger.json")
    recorded = {}
    for ledger in (entry for name in names for entry in ledgers(wd, name)):
        for key, entry in ledger["by_role_task"].items():
            role = key.split("/")[0]
            mine = recorded.setdefault(role, {"calls": 0, "cache_hits": 0, "tokens_in": 0})
            for name in mine:
                mine[name] += entry[name]
    return recorded


@pytest.mark.slow
def test_plan_matches_the_ledgers_of_the_run_it_plans(tmp_path):
    with OpenAITestServer(reply=answer) as server:
        endpoint = {"base_url": server.base_url, "model": MODEL, "max_tokens": 64}
        override = tmp_path / "endpoint.yaml"
        config = {
            "models": {"agent": endpoint, "judge": endpoint},
            "allow_offline_roles": ["memory_writer", "embedder"],
            "run": {"benchmarks": ["synthetic"], "systems": ["bm25_message"]},
            "benchmarks": {"synthetic": {"shards": 1}},
        }
        override.write_text(json.dumps(config))
        (tmp_path / "run").mkdir()
        wd = workdir(tmp_path / "run")

        planned = _plan(wd, override)
        # over budget: refused when the workflow is parsed, naming the plan's total
        tight = tmp_path / "budget.yaml"
        tight.write_text(json.dumps({"budget_usd": 0.000001}))
        refused = subprocess.run(
            [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-n",
             "--directory", str(wd), "--configfile", str(TINY), str(override), str(tight)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert refused.returncode != 0
        total = f"${planned['usd']:.6f}"
        said = [
            line for line in (refused.stdout + refused.stderr).splitlines() if "budget_usd" in line
        ]
        assert said and total in said[0], refused.stdout[-2000:]

        step = "results/synthetic/bm25_message/qa/step{}/shard0/judgements.parquet"
        # one job at a time, as the plan assumes: two judge jobs running side by side both miss
        # the prompts they share (each asks before the other's reply reaches the cache)
        targets = [step.format(0), step.format(1)]
        snakemake(wd, "--cores", "1", configfiles=(TINY, override), targets=targets)
        forced = _plan(wd, override, "--forceall")  # the finished run again, every job
        assert server.stats().total > 0

    recorded = _ledgers(wd)
    for role in ("agent", "judge"):
        plan, ledger = planned["by_role"][role], recorded[role]
        assert plan["calls"] == pytest.approx(ledger["calls"], rel=0.10), role
        # an empty cache, but a prompt asked twice is answered once (the judge's repeated
        # questions, expected from the gold answers)
        assert abs(plan["cache_hits"] - ledger["cache_hits"]) <= 0.10 * ledger["calls"], role
        assert plan["tokens_in"] == pytest.approx(ledger["tokens_in"], rel=0.25), role
        assert plan["usd"] > 0
    assert planned["jobs"] > 0 and planned["hours"] > 0
    # the finished run rerun: every call is answered by the cache, for free
    assert forced["jobs_by_rule"]["answer"] == 2 and forced["calls"] == planned["calls"]
    assert forced["cache_hits"] == forced["calls"] and forced["usd"] == 0.0
    ratios = {
        role: {
            k: round(planned["by_role"][role][k] / recorded[role][k], 3)
            for k in ("calls", "tokens_in")
        }
        for role in ("agent", "judge")
    }
    print("plan / ledger:", ratios)


def test_the_cli_lists_plan():
    assert "plan" in cli.build_parser().format_help()


def test_interactive_calls_follow_the_environment_and_the_schedule(tmp_path):
    """AMemGym: every session has the schedule's rounds, every question a checkpoint and a recall,
    every (question, option) an upper-bound request; a writer's calls are expected, not exact.
    (Measured against a 2-user offline run's ledgers: agent 442 / 442, user 8 / 8 calls.)"""
    import yaml

    from mnemoflow.data import amemgym_procedural
    from mnemoflow.planning.run import plan_run

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["run"] = {"benchmarks": ["amemgym_procedural"], "systems": ["none"]}
    generate = {"users": 2, "periods": 1, "seed": 7}
    config["benchmarks"]["amemgym_procedural"]["generate"] = generate
    wc = {"benchmark": "amemgym_procedural", "protocol": "interactive", "shard": "0"}
    jobs = [
        ("upper_bound", {"benchmark": "amemgym_procedural"}),
        *[
            ("dialogues", {**wc, "system": s, "step": str(k)})
            for s in ("native", "awi")
            for k in (0, 1)
        ],
    ]
    plan = plan_run(config, tmp_path, jobs, model_rules=("dialogues", "upper_bound"))
    users = amemgym_procedural.generate(generate)
    sessions = [len(p["sessions"]) for u in users for p in u["periods"]]
    rounds = {0: 1, 1: 2}  # the shipped schedule: num_rounds_init 1, num_rounds_update 2
    turns = sum(n * rounds[k % 2] for k, n in enumerate(sessions))
    questions = sum(len(u["qas"]) for u in users)
    options = sum(len(q["answer_choices"]) for u in users for q in u["qas"])
    runs = {(r["system"], r["task"]): r for r in plan.to_dict()["runs"]}
    assert runs[("native", "interactive_act")]["calls"] == turns
    assert runs[("native", "amemgym_user_followup")]["calls"] == turns - sum(sessions)
    assert runs[("awi", "amemgym_choice")]["calls"] == runs[("awi", "amemgym_recall")]["calls"]
    assert runs[("awi", "amemgym_choice")]["calls"] == 2 * questions  # asked at both periods
    assert runs[("-", "amemgym_choice")]["calls"] == options
    assert runs[("awi", "memory_organize")]["count"] == "expected"
    assert not [key for key in runs if key[0] == "native" and key[1].startswith("memory_")]
    assert not plan.unplanned and not (tmp_path / "results").exists()


def test_feedback_answers_are_exact_and_live_dialogues_have_bounds(tmp_path):
    """MemoryBench: one answer per test question per step; a live dialogue has 1 .. max_rounds
    answers and one user reaction after each but the last. (Measured against an offline run of
    synthetic_feedback with none and rag: agent 253 in the ledgers, 256 expected in [224, 288];
    user 125 in [64, 128].)"""
    import yaml

    from mnemoflow.data.registry import load_benchmark
    from mnemoflow.planning.run import plan_run

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["run"] = {"benchmarks": ["synthetic_feedback"], "systems": ["none"]}
    spec = config["benchmarks"]["synthetic_feedback"]  # batch_size 8, max_rounds 3
    wc = {"benchmark": "synthetic_feedback", "system": "none", "protocol": "on_policy"}
    jobs = [
        ("feedback_train_dialogues", {"benchmark": "synthetic_feedback", "system": "none"}),
        *[("feedback_step", {**wc, "step": str(k)}) for k in (0, 1)],
    ]
    plan = plan_run(config, tmp_path, jobs, model_rules=("feedback_step",))
    questions = load_benchmark(spec).questions
    test, train = (int((questions["split"] == s).sum()) for s in ("test", "train"))
    runs = {(r["protocol"], r["role"]): r for r in plan.to_dict()["runs"]}
    assert (runs[("feedback", "agent")]["min"], runs[("feedback", "agent")]["max"]) == (
        train,
        3 * train,
    )
    assert (runs[("feedback", "user")]["min"], runs[("feedback", "user")]["max"]) == (
        train,
        2 * train,
    )
    live = min(8, train)  # step 1 converses one batch, then both steps answer the test split
    assert runs[("on_policy", "agent")]["min"] == 2 * test + live
    assert runs[("on_policy", "agent")]["max"] == 2 * test + 3 * live
    assert runs[("on_policy", "agent")]["count"] == "expected"


def test_the_offline_users_dialogue_length_is_read_from_each_item():
    """The offline simulated user likes an answer covering half the reference: it ends at once
    without a reference, after the repeated correction when that covers it, else the dialogue
    runs to max_rounds; a model user is expected at the midpoint."""
    from mnemoflow.planning.feedback import _rounds

    short = {"question": "Pick my genre.", "answer": "My genre is poetry."}
    long = {"question": "Write it.", "answer": "First part. " + "A second, long part. " * 5}
    assert _rounds({"question": "q", "answer": ""}, 3, True) == (1.0, 1.0)
    assert _rounds(short, 3, True) == (2.0, 2.0)
    assert _rounds(short, 2, True) == (2.0, 1.0)
    assert _rounds(long, 3, True) == (3.0, 2.0)
    assert _rounds(long, 1, True) == (1.0, 0.0)
    assert _rounds(long, 3, False) == (2.0, 1.5)


def test_the_parse_time_plan_is_kept_by_what_it_depends_on(tmp_path):
    from mnemoflow.planning.budget import state_key

    config = {"models": {}, "cache": "results/cache/llm", "budget_usd": 1}
    key = state_key(config, tmp_path)
    assert state_key({**config, "budget_usd": 2}, tmp_path) == key  # the budget is not planned
    assert state_key({**config, "seed": 1}, tmp_path) != key
    ledger = tmp_path / "results" / "b" / "ingest.ledger.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text("{}")  # a job has run: it is not planned again
    assert state_key(config, tmp_path) != key


def test_panel_and_probe_calls_are_planned_and_priced_per_judge(tmp_path):
    """``judge.panel``: every shard's answers once per panel judge, and the benchmark's probe
    once per judge (the configured one too), each priced by its own judge's model."""
    import yaml

    from mnemoflow.data.registry import load_benchmark
    from mnemoflow.eval.static_qa.panel import probe_set
    from mnemoflow.planning.run import plan_run

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    tiny = yaml.safe_load(TINY.read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["run"] = tiny["run"]
    config["benchmarks"]["synthetic"] = tiny["benchmarks"]["synthetic"]
    paid = {"base_url": "http://127.0.0.1:9/v1", "model": MODEL, "max_tokens": 4}
    panel = [
        {"name": "heuristic", "kind": "generic", "model": {"backend": "offline"}},
        {"name": "paid", "kind": "generic", "model": paid},
    ]
    plain = plan_run(config, tmp_path).to_dict()
    assert "judge_panel" not in plain["jobs_by_rule"] and "judge_probe" not in plain["jobs_by_rule"]
    assert not any(role.startswith("judge[") for role in plain["by_role"])

    config["judge"] = {"panel": panel, "probe": {"size": 20}}
    planned = plan_run(config, tmp_path).to_dict()
    # 2 systems x 2 steps x 2 shards of panel jobs, one probe for the benchmark
    assert (planned["jobs_by_rule"]["judge_panel"], planned["jobs_by_rule"]["judge_probe"]) == (
        8,
        1,
    )
    data = load_benchmark(config["benchmarks"]["synthetic"])
    probes = probe_set(data.questions, data.sessions, ["generic"], 20, 0)
    roles = planned["by_role"]
    for role in ("judge[heuristic]", "judge[paid]"):
        # every answer of both systems, and every probe
        assert roles[role]["calls"] == 2 * len(data.questions) + len(probes), role
    assert roles["judge[paid]"]["usd"] > 0 and roles["judge[heuristic]"]["usd"] == 0.0
    assert roles["judge"]["calls"] == plain["by_role"]["judge"]["calls"] + len(probes)
    probe_runs = [r for r in planned["runs"] if r["system"] == "probe"]
    assert sorted(r["role"] for r in probe_runs) == ["judge", "judge[heuristic]", "judge[paid]"]
    assert planned["usd"] > plain["usd"]


def test_overflow_abort_is_refused_with_the_planned_counts_per_role(monkeypatch):
    from mnemoflow.errors import ConfigError
    from mnemoflow.planning import budget

    planned = {"usd": 0.0, "calls": 10, "unpriced": [], "overflows": {"agent": 3, "judge": 2}}
    monkeypatch.setattr(budget, "planned_totals", lambda config, rules: planned)
    url = "http://127.0.0.1:9/v1"
    models = {"agent": {"base_url": url, "model": "m", "overflow": "abort"},
              "judge": {"base_url": url, "model": "m"}}  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        budget.check_budget({"models": models})
    assert str(caught.value) == (
        "config models.agent.overflow: abort, and the plan has prompts over the context window "
        "(agent 3, judge 2); the run would stop at the first; `fail` fails those items and goes "
        "on, `truncate_oldest` cuts their oldest history (`mnemoflow plan` shows them)"
    )
    budget.check_budget({"models": models}, main_process=False)  # a job's own parse: no check
    models["agent"]["overflow"] = "fail"  # the default: those items fail, the run goes on
    budget.check_budget({"models": models})
    planned["overflows"] = {"judge": 2}
    models["agent"]["overflow"] = "abort"
    budget.check_budget({"models": models})  # no overflow of the aborting role: it runs


def test_an_imported_system_is_planned_without_agent_calls(tmp_path):
    """Its answers are read from a file: only the judge is asked about them."""
    import yaml

    from mnemoflow.planning.run import plan_run

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    tiny = yaml.safe_load(TINY.read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["run"] = {"benchmarks": ["synthetic"], "systems": ["none"]}
    config["benchmarks"]["synthetic"] = tiny["benchmarks"]["synthetic"]
    plain = plan_run(config, tmp_path).to_dict()["by_role"]
    config["systems"]["published"] = {
        "type": "imported", "format": "longmemeval", "path": "h.jsonl", "sha256": "0" * 64
    }  # fmt: skip
    config["run"]["systems"] = ["none", "published"]
    both = plan_run(config, tmp_path).to_dict()["by_role"]
    assert both["agent"]["calls"] == plain["agent"]["calls"] > 0
    assert both["judge"]["calls"] == 2 * plain["judge"]["calls"]
