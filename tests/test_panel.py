"""The judge panel and the false-positive probe: probes built from the gold, Cohen's kappa (a
worked example), the panel's tables and flags, config checks, and the panel judged through the
real judges against the offline model and a scripted OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json
import math
import re

import pandas as pd
import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.eval.static_qa.panel import (
    CONFIGURED,
    PanelJudge,
    judge_panel,
    judge_probes,
    panel_limits,
    panel_of,
    probe_set,
    probe_settings,
    public_panel,
)
from mnemoflow.eval.static_qa.probes import ABSTENTION, build_probes
from mnemoflow.intervals import wilson_interval
from mnemoflow.llm.addresses import redact
from mnemoflow.llm.gateway import Gateway
from mnemoflow.report.panel import (
    cohen_kappa,
    flagged_judges,
    panel_markdown,
    panel_tables,
)
from mnemoflow.testing.openai_server import OpenAITestServer

# --- stand-in data ------------------------------------------------------------------------------

TURNS = {
    "e1": [
        "We moved to Lisbon on 12 May 2021 after two years in Porto.",
        "My sister Clara visits every summer, and we have 3 dogs now.",
        "Back in 2019 we still lived with Marco and 7 cats.",
    ],
    "e2": ["I work as an architect.", "My partner works as a nurse."],
}
QUESTIONS = [
    ("e1", "q_city", "Where did we move?", "Lisbon"),
    ("e1", "q_date", "When did we move?", "12 May 2021"),
    ("e1", "q_dogs", "How many dogs do we have?", "3"),
    ("e1", "q_gone_abs", "What is my cat's name?", "never mentioned"),
    ("e2", "q_job", "What is my job?", "architect"),
    ("e2", "q_partner", "What does my partner do?", "nurse"),
]


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    sessions = pd.DataFrame(
        [
            {"benchmark": "toy", "episode_id": e, "content": text}
            for e, texts in TURNS.items()
            for text in texts
        ]
    )
    questions = pd.DataFrame(
        [
            {
                "benchmark": "toy",
                "episode_id": e,
                "question_id": qid,
                "question": q,
                "answer": a,
                "question_type": "fact",
                "meta": "{}",
            }
            for e, qid, q, a in QUESTIONS
        ]
    )
    return questions, sessions


# --- probes -------------------------------------------------------------------------------------


def test_swapped_probes_take_a_fact_of_the_same_kind_from_the_same_conversation():
    questions, sessions = tables()
    probes = {(p.question_id, p.kind): p for p in build_probes(questions, sessions, 100, seed=1)}
    date = probes[("q_date", "swapped")]
    assert date.response in {"2019"} and date.detail == "12 May 2021 -> 2019"
    # 3 dogs: 2 (years in Porto) is off by one and left alone; 7 (cats) is the only other number
    assert probes[("q_dogs", "swapped")].response == "7"
    city = probes[("q_city", "swapped")].response
    assert city in {"Porto", "Clara", "Marco"}  # names inside sentences, never "My" or "Back"
    # no name, date or number in the gold: another gold answer of the same conversation
    assert probes[("q_job", "swapped")].response == "nurse"
    assert probes[("q_dogs", "abstention")].response == ABSTENTION
    assert probes[("q_dogs", "vague")].response == "A few, I think."
    assert not any(qid == "q_gone_abs" for qid, _ in probes)  # abstention questions: no probe
    for (qid, _), probe in probes.items():
        gold = dict(zip(questions.question_id, questions.answer, strict=True))[qid]
        assert gold.lower() not in probe.response.lower(), probe


def test_probes_are_seeded_and_stop_at_the_size_asked():
    questions, sessions = tables()
    assert build_probes(questions, sessions, 4, seed=5) == build_probes(
        questions, sessions, 4, seed=5
    )
    few = build_probes(questions, sessions, 4, seed=5)
    assert 4 <= len(few) <= 6  # whole questions: at most one question's probes past the size
    # a tiny run uses what there is: 5 answerable questions, 3 probes each
    assert len(build_probes(questions, sessions, 1000, seed=5)) == 15
    reordered = build_probes(questions.iloc[::-1], sessions, 4, seed=5)
    assert reordered == few  # the sample does not depend on the table's row order
    with pytest.raises(ValueError, match="probe.size"):
        build_probes(questions, sessions, 0)


def test_probe_set_leaves_out_questions_a_judge_does_not_score():
    questions, sessions = tables()
    probes = probe_set(questions, sessions, ["generic"], 100, 0)
    assert set(probes.probe) == {"swapped", "vague", "abstention"}
    assert (probes.system == "probe").all() and len(probes) == 15


# --- kappa and the panel's tables ---------------------------------------------------------------


def test_cohen_kappa_worked_example():
    # agreement 8/10; both judges say yes 6/10: chance 0.6*0.6 + 0.4*0.4 = 0.52
    a = [1, 1, 0, 0, 1, 0, 1, 0, 1, 1]
    b = [1, 0, 0, 0, 1, 0, 1, 1, 1, 1]
    assert cohen_kappa(a, b) == pytest.approx((0.8 - 0.52) / (1 - 0.52))  # 0.5833
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa([1, 1], [1, 1]))  # chance agreement 1: undefined
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])


def _judgements(judge: str, values: list[float], step: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark": "toy",
            "system": "s",
            "protocol": "qa",
            "step": step,
            "question_id": [f"q{i}" for i in range(len(values))],
            "question_type": "fact",
            "judge": f"m/{judge}",
            "metric": "accuracy",
            "value": values,
            "raw_reply": "",
            "parse_ok": [not math.isnan(v) for v in values],
        }
    )


def _probe_rows(judge: str, accepted: int, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark": "toy",
            "question_id": [f"q{i}" for i in range(n)],
            "probe": "swapped",
            "panel_judge": judge,
            "value": [1.0] * accepted + [0.0] * (n - accepted),
        }
    )


def test_panel_tables_accuracy_spread_kappa_disagreements_and_flags():
    configured = _judgements("cfg", [1, 1, 0, 0, 1, 0, 1, 0, 1, 1])
    lenient = _judgements("len", [1, 1, 1, 1, 1, 1, 1, 1, 1, float("nan")])
    strict = _judgements("str", [1, 0, 0, 0, 1, 0, 1, 1, 1, 1])
    panel = pd.concat(
        [lenient.assign(panel_judge="lenient"), strict.assign(panel_judge="strict")],
        ignore_index=True,
    )
    probes = pd.concat(
        [
            _probe_rows(CONFIGURED, 2, 100),
            _probe_rows("lenient", 40, 100),
            _probe_rows("strict", 0, 100),
        ]
    )
    out = panel_tables(panel, configured, probes)
    accuracy = out["accuracy"].set_index("judge")
    assert accuracy.loc[CONFIGURED, "accuracy"] == pytest.approx(0.6)
    assert accuracy.loc["lenient", "accuracy"] == 1.0 and accuracy.loc["lenient", "n"] == 9
    assert accuracy.loc["lenient", "unscored"] == 1
    assert accuracy.loc["lenient", "false_positive_rate"] == pytest.approx(0.4)
    assert list(accuracy.flagged) == [False, True, False]
    spread = out["spread"].iloc[0]
    assert (spread.configured, spread.panel_min, spread.panel_max) == (0.6, 0.6, 1.0)
    assert spread.spread == pytest.approx(0.4)
    kappa = out["kappa"].set_index(["judge_a", "judge_b"])
    assert kappa.loc[(CONFIGURED, "strict"), "kappa"] == pytest.approx(0.28 / 0.48)
    assert kappa.loc[(CONFIGURED, "strict"), "n"] == 10
    assert kappa.loc[(CONFIGURED, "lenient"), "n"] == 9  # the unscored answer left out
    split = out["disagreements"]
    # q9: configured 1, lenient unscored, strict 1 -> no disagreement among those who scored
    assert list(split.question_id) == ["q1", "q2", "q3", "q5", "q7"]
    probe = out["probe"].set_index("judge")
    low, high = wilson_interval(40, 100)
    assert (probe.loc["lenient", "ci95_low"], probe.loc["lenient", "ci95_high"]) == (low, high)
    assert flagged_judges(out) == [
        f"toy: lenient accepts 40% of 100 wrong answers (95 % CI {low:.0%}-{high:.0%})"
    ]
    text = "\n".join(panel_markdown(out))
    assert "## Judge panel" in text and "**Lenient judge**: toy: lenient accepts 40%" in text
    assert "| toy | s | lenient |" in text and "Answers the judges disagree on: 5" in text
    assert panel_markdown({}) == []


def test_accuracy_is_read_at_each_runs_last_step():
    configured = pd.concat([_judgements("cfg", [0, 0]), _judgements("cfg", [1, 1], step=1)])
    panel = pd.concat([_judgements("p", [0, 0]), _judgements("p", [1, 0], step=1)])
    out = panel_tables(panel.assign(panel_judge="p"), configured, pd.DataFrame())
    accuracy = out["accuracy"].set_index("judge")
    assert accuracy.loc[CONFIGURED, "accuracy"] == 1.0 and accuracy.loc["p", "accuracy"] == 0.5
    assert out["probe"].empty and "flagged" not in out["accuracy"]
    assert len(out["disagreements"]) == 1  # step 1's q1 (kappa and the list: every step)


# --- config -------------------------------------------------------------------------------------

OFFLINE = {"backend": "offline"}


def test_panel_of_resolves_endpoints_and_refuses_bad_entries_in_one_line():
    endpoints = {"lab": {"base_url": "http://127.0.0.1:9/v1"}}
    judges = panel_of(
        {
            "panel": [
                {"name": "a", "kind": "generic", "model": OFFLINE},
                {"name": "b", "kind": "locomo", "model": {"endpoint": "lab", "model": "m"}},
            ]
        },
        endpoints,
    )
    assert [j.name for j in judges] == ["a", "b"]
    assert judges[1].model["base_url"] == "http://127.0.0.1:9/v1"
    assert panel_of({}) == [] and panel_of(None) == []
    bad = [
        ([{"name": "a", "kind": "generic", "model": OFFLINE}], "two or more judges"),
        (
            [
                {"name": "a", "kind": "generic", "model": OFFLINE},
                {"name": "a", "kind": "generic", "model": OFFLINE},
            ],
            r"judge.panel\[1\].name: 'a' is used twice",
        ),
        (
            [
                {"name": CONFIGURED, "kind": "generic", "model": OFFLINE},
                {"name": "b", "kind": "generic", "model": OFFLINE},
            ],
            r"panel\[0\].name: 'configured' is the configured judge's name",
        ),
        (
            [
                {"name": "a", "kind": "nope", "model": OFFLINE},
                {"name": "b", "kind": "generic", "model": OFFLINE},
            ],
            r"panel\[0\].kind: one of",
        ),
        (
            [
                {"name": "a", "kind": "generic", "model": OFFLINE},
                {"name": "b", "kind": "generic", "model": {"endpoint": "missing"}},
            ],
            r"panel\[1\].model: .*'missing' is not defined",
        ),
    ]
    for panel, message in bad:
        with pytest.raises(ConfigError, match=message) as caught:
            panel_of({"panel": panel}, endpoints)
        assert "\n" not in str(caught.value)


def test_probe_settings_default_to_100_probes_and_the_judges_seed():
    assert probe_settings({}) == (100, 0)
    assert probe_settings({"seed": 4}) == (100, 4)
    assert probe_settings({"seed": 4, "probe": {"size": 12, "seed": 9}}) == (12, 9)


def test_panel_limits_take_the_larger_share_of_an_endpoint_two_judges_share():
    url = "http://127.0.0.1:9/v1"
    bound = {"base_url": url, "model": "m", "concurrency": 8}
    models = {"agent": bound}
    limits = panel_limits(models, [{**bound, "model": "a"}, {**bound, "model": "b"}], 4)
    assert limits.resources == {"endpoint_127_0_0_1_9_2d234c97": 2}  # host, port, path hash
    assert limits.params[redact(url)]["concurrency"] == 2  # keyed as the gateway sees it
    assert panel_limits(models, [OFFLINE], 4).resources == {}


# --- judged through the real judges -------------------------------------------------------------


def test_panel_and_probe_judged_by_the_offline_judge_and_a_scripted_endpoint(tmp_path):
    """A scripted endpoint that says yes to everything accepts every probe; the offline
    heuristic rejects them. The panel's rows carry the judgements schema plus the judge's name."""
    questions, sessions = tables()
    answers = pd.DataFrame(
        {
            "benchmark": "toy",
            "system": "s",
            "protocol": "qa",
            "step": 0,
            "question_id": ["q_city", "q_dogs", "q_gone_abs"],
            "response": ["You moved to Lisbon.", "Two dogs.", "I don't know."],
        }
    )
    with OpenAITestServer(reply="Yes.") as server:
        yes = {"base_url": server.base_url, "model": "yes-judge"}
        judges = [PanelJudge("heuristic", "generic", OFFLINE), PanelJudge("yes", "generic", yes)]
        configured = PanelJudge(CONFIGURED, "generic", OFFLINE)
        gateways = {
            j.name: Gateway.from_config({"judge": j.model}, tmp_path / f"{j.name}.sqlite")
            for j in [*judges, configured]
        }
        probes = probe_set(questions, sessions, ["generic"], 100, 0)

        async def ask():
            try:
                panel = await judge_panel(judges, gateways, questions, answers)
                probed = await judge_probes([configured, *judges], gateways, questions, probes)
                return panel, probed
            finally:
                for gateway in gateways.values():
                    await gateway.aclose()

        panel, probed = asyncio.run(ask())
        calls = server.stats().total
    for gateway in gateways.values():
        gateway.close()
    verdicts = panel.set_index(["panel_judge", "question_id"]).value
    assert verdicts[("heuristic", "q_city")] == 1.0 and verdicts[("heuristic", "q_dogs")] == 0.0
    assert verdicts[("heuristic", "q_gone_abs")] == 1.0  # declined an unanswerable question
    assert (verdicts["yes"] == 1.0).all()
    assert set(panel.judge) == {"offline-heuristic/qa-v1", "yes-judge/qa-v1"}
    assert calls == len(answers) + len(probes)  # one ask per answer and per probe
    accepted = probed.groupby("panel_judge").value.mean()
    assert accepted["yes"] == 1.0 and accepted["heuristic"] == 0.0 and accepted[CONFIGURED] == 0.0
    assert len(probed) == 3 * len(probes) and probed.parse_ok.all()
    out = panel_tables(panel, pd.DataFrame(columns=panel.columns), probed)
    assert [line.split(":")[1].split()[0] for line in flagged_judges(out)] == ["yes"]


# --- the workflow ---------------------------------------------------------------------------------


def test_a_panel_run_adds_its_section_and_keeps_the_configured_judgements(tiny_run, tmp_path):
    """The tiny run again with a panel of two judges (the offline heuristic and a scripted
    endpoint that accepts everything): only the panel's jobs, the summary and the report run."""
    from mnemoflow.data.tables import read_table
    from tests.workflow import copy_run, snakemake

    assert not list(tiny_run.glob("results/**/panel_judgements.parquet"))  # no panel: no jobs
    assert not (tiny_run / "results" / "synthetic" / "probe").exists()
    wd = copy_run(tiny_run, tmp_path / "run")
    judged = sorted(wd.glob("results/synthetic/*/qa/step*/shard*/judgements.parquet"))
    before = {p: p.read_bytes() for p in judged}
    with OpenAITestServer(reply="yes") as server:
        panel = [
            {"name": "heuristic", "kind": "generic", "model": OFFLINE},
            {
                "name": "yes",
                "kind": "generic",
                "model": {"base_url": server.base_url, "model": "y"},
            },
        ]
        override = tmp_path / "panel.yaml"
        override.write_text(json.dumps({"judge": {"panel": panel, "probe": {"size": 12}}}))
        from tests.workflow import TINY

        log = snakemake(wd, configfiles=(TINY, override))
    ran = set(re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", log))
    assert ran == {"judge_panel", "judge_probe", "summarize", "report", "all"}, ran
    assert {p: p.read_bytes() for p in judged} == before  # the headline's judge untouched
    shards = sorted(wd.glob("results/synthetic/*/qa/step*/shard*/panel_judgements.parquet"))
    assert len(shards) == len(judged) == 8
    rows = read_table(shards[0], "panel_judgements")
    assert set(rows.panel_judge) == {"heuristic", "yes"}
    probes = read_table(wd / "results/synthetic/probe/probe_judgements.parquet", "probe_judgements")
    assert set(probes.panel_judge) == {CONFIGURED, "heuristic", "yes"}
    assert len(probes) == 3 * 12  # 12 probes (4 questions x 3 kinds), each by 3 judges
    summary = (wd / "results" / "summary.md").read_text()
    assert (
        "## Judge panel" in summary and "**Lenient judge**: synthetic: yes accepts 100%" in summary
    )
    page = (wd / "results" / "report.html").read_text()
    assert "Judge panel" in page and "Lenient judge" in page
    assert (wd / "results" / "report" / "panel_kappa.tsv").is_file()
    assert "Calls per judge" in summary and "Calls per judge" in page


def test_the_config_schema_names_the_panel_entry_and_field():
    import yaml

    from mnemoflow.config_schema import check_config
    from tests.workflow import REPO

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    schema = REPO / "schemas" / "config.schema.yaml"
    good = [
        {"name": "a", "kind": "generic", "model": OFFLINE},
        {"name": "b", "kind": "generic", "model": {"base_url": "http://x/v1", "model": "m"}},
    ]
    check_config({**config, "judge": {"panel": good, "probe": {"size": 5}}}, schema)
    bad = [
        ({"panel": [good[0]]}, "config judge.panel: .* is too short"),
        ({"panel": [good[0], {"name": "b", "kind": "generic"}]}, "judge.panel.1: 'model'"),
        ({"panel": good, "probe": {"size": 0}}, "config judge.probe.size: 0 is less than"),
        ({"panel": [good[0], {**good[1], "name": "b c"}]}, "config judge.panel.1.name"),
    ]
    for judge, message in bad:
        with pytest.raises(ConfigError, match=message):
            check_config({**config, "judge": judge}, schema)


def test_panel_costs_add_up_each_judges_ledgers(tmp_path):
    from mnemoflow.report.panel import panel_costs

    def ledger(calls, usd):
        totals = {"calls": calls, "cache_hits": 1, "tokens_in": 10 * calls, "tokens_out": calls}
        return {"totals": {**totals, "parse_failures": 0, "usd": usd}}

    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"judges": {"paid": ledger(3, 0.5), "free": ledger(2, 0.0)}}))
    second.write_text(json.dumps({"judges": {"paid": ledger(4, 0.25), "free": ledger(1, None)}}))
    cost = panel_costs([str(first), str(second)]).set_index("judge")
    assert cost.loc["paid", "calls"] == 7 and cost.loc["paid", "tokens_in"] == 70
    assert cost.loc["paid", "usd"] == pytest.approx(0.75) and cost.loc["paid", "cache_hits"] == 2
    assert math.isnan(cost.loc["free", "usd"])  # a model without a price: no total
    first.write_text("{}")
    with pytest.raises(ValueError, match="a.json: not a panel ledger file"):
        panel_costs([str(first)])


def test_a_panel_judges_address_is_written_redacted_and_found_again_by_its_job():
    """A token in a panel judge's URL path reaches neither params nor the report's config; the
    job finds the real address in the config by the redacted form."""
    from mnemoflow.jobs.context import JobEnv, config_bindings
    from mnemoflow.llm.addresses import redacted_config

    url = "http://127.0.0.1:9/tok_canary123/v1"
    entry = {"name": "b", "kind": "generic", "model": {"base_url": url, "model": "m"}}
    panel = [entry, {**entry, "name": "c"}]
    config = {"models": {"judge": {"backend": "offline"}}, "judge": {"panel": panel}}
    judges = public_panel(panel_of(config["judge"]))
    assert {j.model["base_url"] for j in judges} == {redact(url)}
    assert "canary" not in json.dumps(redacted_config(config))
    env = JobEnv(models={"judge": judges[0].model}, bindings=config_bindings(config))
    assert [a.url for a in env.given_addresses().values()] == [url]
