"""``repeats: N``: seeds per repeat, the requests they send, and scores across seeds."""

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow.config_schema import check_config
from mnemoflow.data.tables import SUMMARY
from mnemoflow.errors import ConfigError
from mnemoflow.layout import path_seed
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.ledger import Ledger
from mnemoflow.llm.types import ChatRequest
from mnemoflow.planning.run import plan_run
from mnemoflow.repeats import folder_seed, folders, repeat_seeds, seeded_models
from mnemoflow.report.headline import headline_tables, is_headline
from mnemoflow.report.seeds import across_seeds, seeds_table
from mnemoflow.report.summaries import load_ledger, run_costs
from mnemoflow.report.summary import summary_markdown

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"
CONFIG = {
    "run": {"benchmarks": ["b"], "systems": ["s"]},
    "models": {},
    "benchmarks": {},
    "systems": {},
}


def scores(value: float, low: float, high: float, n: int = 10) -> pd.DataFrame:
    """One seed's summary of one run: accuracy micro with its interval rows, and a counter."""
    rows = [
        ("accuracy", "micro", value, n),
        ("accuracy", "ci95_low", low, n),
        ("accuracy", "ci95_high", high, n),
        ("parse_failures", "count", 0.0, n),
    ]
    return pd.DataFrame(
        [{"benchmark": "synthetic", "system": "bm25", "protocol": "qa", "step": 0,
          "metric": m, "aggregate": a, "value": v, "n": k} for m, a, v, k in rows]
    )[SUMMARY.names]  # fmt: skip


# --- seeds and paths ---------------------------------------------------------------------------


def test_repeat_k_runs_with_seed_plus_k_and_repeat_0_keeps_todays_paths():
    assert repeat_seeds(13, 3) == [13, 14, 15]
    assert folders(13, 3) == ["", "seed14/", "seed15/"]
    assert folders(13, 1) == [""]
    assert [folder_seed(f, 13) for f in folders(13, 3)] == [13, 14, 15]
    assert path_seed("results/seed14/synthetic/bm25/qa/step0/scores.parquet") == 14
    assert path_seed("/tmp/x/results/seed7/b/s/qa/step1/normalized.parquet") == 7
    assert path_seed("results/synthetic/bm25/qa/step0/scores.parquet") is None


def test_repeats_seed_the_sampling_roles_only():
    models = {
        "agent": {"base_url": "http://x/v1", "model": "m", "temperature": 0.7},
        "user": {"base_url": "http://x/v1", "model": "m", "seed": 100},
        "memory_writer": {},
        "judge": {"base_url": "http://x/v1", "model": "j", "seed": 5},
        "embedder": {"backend": "offline"},
    }
    assert seeded_models(models, 13, 13) == models  # repeat 0: today's params, nothing reruns
    second = seeded_models(models, 15, 13)  # repeat 2
    assert second["agent"]["seed"] == 15  # no seed of its own: the run's seed + 2
    assert second["user"]["seed"] == 102  # its own seed + 2
    assert second["memory_writer"] == {}  # unbound: the offline default, deterministic
    assert second["judge"] == models["judge"] and second["embedder"] == models["embedder"]
    assert "seed" not in models["agent"]  # the config is not edited in place


def test_each_repeat_sends_its_own_seeded_requests():
    """The response cache keys a request by its seed: repeats must not share keys (else repeat 1
    would be served repeat 0's replies), the judge's requests stay the same."""
    base = {"agent": {"base_url": "http://x/v1", "model": "m", "temperature": 0.7},
            "judge": {"base_url": "http://x/v1", "model": "j"}}  # fmt: skip
    keys = {}
    for seed in (13, 14, 15):
        gateway = Gateway.from_config(seeded_models(base, seed, 13))
        ask = ChatRequest(role="agent", task="answer", messages=[{"role": "user", "content": "q"}])
        grade = ChatRequest(role="judge", task="judge", messages=[{"role": "user", "content": "a"}])
        keys[seed] = (gateway.request_key(ask), gateway.request_key(grade))
        gateway.close()
    assert len({agent for agent, _ in keys.values()}) == 3
    assert len({judge for _, judge in keys.values()}) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "config repeats: 0 is less than the minimum of 1"),
        ("2", "config repeats: '2' is not of type 'integer'"),
        (1.5, "config repeats: 1.5 is not of type 'integer'"),
    ],
)
def test_repeats_must_be_a_positive_integer(value, message):
    with pytest.raises(ConfigError) as raised:
        check_config({**CONFIG, "repeats": value}, SCHEMA)
    assert str(raised.value) == message


def test_repeats_may_be_any_positive_integer():
    check_config({**CONFIG, "repeats": 3}, SCHEMA)  # accepted: no error
    assert folders(7, 3) == ["", "seed8/", "seed9/"]  # repeat 0 keeps today's paths


# --- scores across seeds -----------------------------------------------------------------------


def test_mean_and_sd_across_seeds_worked_example():
    """Accuracy 0.5, 0.7, 0.6 over three seeds: mean 0.6, sample sd sqrt(0.02 / 2) = 0.1."""
    seeds = [scores(0.5, 0.2, 0.8), scores(0.7, 0.4, 0.9), scores(0.6, 0.3, 0.85)]
    rows = across_seeds(seeds).set_index(["metric", "aggregate"])
    assert rows.loc[("accuracy", "seeds_mean:micro"), "value"] == pytest.approx(0.6)
    assert rows.loc[("accuracy", "seeds_sd:micro"), "value"] == pytest.approx(0.1)
    assert rows.loc[("accuracy", "seeds_mean:micro"), "n"] == 3  # seeds, not questions
    assert rows.loc[("parse_failures", "seeds_sd:count"), "value"] == 0.0
    # interval bounds are one seed's interval: a mean of bounds is no interval
    assert not rows.index.get_level_values("aggregate").str.contains("ci95").any()
    assert list(across_seeds(seeds).columns) == SUMMARY.names


def test_one_seed_has_no_spread_rows():
    assert across_seeds([scores(0.5, 0.2, 0.8)]).empty
    two = across_seeds([scores(0.5, 0.2, 0.8), scores(0.5, 0.2, 0.8)])
    two = two.set_index(["metric", "aggregate"])
    assert two.loc[("accuracy", "seeds_sd:micro"), "value"] == 0.0


def test_a_row_only_some_seeds_have_counts_only_those():
    first, second = scores(0.5, 0.2, 0.8), scores(0.7, 0.4, 0.9)
    second = second[second["metric"] != "parse_failures"]
    rows = across_seeds([first, second]).set_index(["metric", "aggregate"])
    assert rows.loc[("parse_failures", "seeds_mean:count"), "n"] == 1
    assert math.isnan(rows.loc[("parse_failures", "seeds_sd:count"), "value"])


def summary_with_seeds() -> pd.DataFrame:
    base = scores(0.5, 0.2, 0.8)
    seeds = across_seeds([base, scores(0.7, 0.4, 0.9), scores(0.6, 0.3, 0.85)])
    return pd.concat([base, seeds], ignore_index=True)


def test_summary_shows_mean_and_sd_beside_the_per_question_interval():
    table = seeds_table(summary_with_seeds(), is_headline)
    assert table.to_dict("records") == [
        {
            "benchmark": "synthetic",
            "system": "bm25",
            "protocol": "qa",
            "metric": "accuracy",
            "base seed": 0.5,
            "95 % CI (questions)": "[0.200, 0.800]",
            "mean ± sd across seeds": "0.600 ± 0.100 (3 seeds)",
        }
    ]
    text = summary_markdown(summary_with_seeds())
    assert "## Across seeds" in text
    assert (
        "| synthetic | bm25 | qa | accuracy | 0.500 | [0.200, 0.800] | 0.600 ± 0.100 (3 seeds) |"
        in text
    )


def test_without_repeats_the_summary_has_no_seeds_section():
    assert "Across seeds" not in summary_markdown(scores(0.5, 0.2, 0.8))
    assert seeds_table(scores(0.5, 0.2, 0.8), is_headline).empty


def test_headline_table_has_a_seeds_column_beside_the_interval():
    summary = summary_with_seeds().assign(ci_low=math.nan, ci_high=math.nan, ci_method="")
    table = headline_tables(summary)["synthetic"]
    columns = list(table.columns)
    at = columns.index("accuracy 95 % CI")
    assert columns[at + 1] == "accuracy mean ± sd (seeds)"
    assert table["accuracy mean ± sd (seeds)"].tolist() == ["0.600 ± 0.100 (3 seeds)"]
    plain = headline_tables(scores(0.5, 0.2, 0.8).assign(ci_low=0.2, ci_high=0.8, ci_method="w"))
    assert not any("seeds" in c for c in plain["synthetic"].columns)


# --- the plan and budget_usd count every repeat ----------------------------------------------


def test_the_plan_counts_every_repeat(tmp_path):
    """Each repeat's agent and judge calls, on the parse-time path (``budget_usd``: no DAG) and on
    the dry run's jobs (``mnemoflow plan``), whose wildcards name the repeat."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["run"] = {"benchmarks": ["synthetic"], "systems": ["bm25_message"]}
    config["benchmarks"]["synthetic"]["params"] = {"users": 2, "periods": 1, "seed": 3}

    def calls(plan):
        return {(r["role"], r["task"]): r["calls"] for r in plan.to_dict()["runs"]}

    once = calls(plan_run(config, tmp_path, priced_only=True))
    assert once == {("agent", "answer"): 12, ("judge", "judge_qa"): 12}
    twice = calls(plan_run({**config, "repeats": 2}, tmp_path, priced_only=True))
    assert twice == {key: 2 * n for key, n in once.items()}
    wc = {"benchmark": "synthetic", "system": "bm25_message", "step": "0", "shard": "0"}
    jobs = [(rule, {"repeat": r, **wc}) for r in ("", "seed14/") for rule in ("answer", "judge")]
    planned = plan_run({**config, "repeats": 2}, tmp_path, jobs, priced_only=True)
    assert calls(planned) == twice and planned.jobs == {"answer": 2, "judge": 2}

    # the judge is not seeded: the second repeat's judge prompts over the gold stand-in are the
    # first's, answered by the cache in the run and so planned as hits
    def judge_hits(plan):
        return plan.to_dict()["by_role"]["judge"]["cache_hits"]

    full_once = plan_run(config, tmp_path)
    assert judge_hits(plan_run({**config, "repeats": 2}, tmp_path)) == judge_hits(full_once) + 12


def test_the_cost_of_a_run_counts_every_seed(tmp_path):
    """Two seeds' ledgers of one run: its dollars are both seeds', its correct answers too (the
    mean across seeds, 0.4, times 2 seeds times 60 questions = 48); its score is the base seed's."""
    roles = {"agent": {"backend": "openai", "model": "gpt-x"}}
    ledgers = []
    for folder in ("", "seed14"):
        shard = tmp_path / "results" / folder / "locomo" / "bm25" / "qa" / "step0" / "shard0"
        shard.mkdir(parents=True)
        ledger = Ledger()
        for _ in range(3):  # 3 calls x (100k in x $2 + 10k out x $10) / 1M = $0.9
            ledger.record("agent", "answer", model="gpt-x", cache_hit=False, tokens_in=100_000,
                          tokens_out=10_000, latency_s=0.1)  # fmt: skip
        (shard / "answers.ledger.json").write_text(ledger.to_json({"roles": roles}))
        ledgers.append(load_ledger(shard / "answers.ledger.json"))
    rows = [("micro", 0.5, 60), ("seeds_mean:micro", 0.4, 2), ("seeds_sd:micro", 0.14, 2)]
    summary = pd.DataFrame(
        [("locomo", "bm25", "qa", 0, "accuracy", a, v, n) for a, v, n in rows],
        columns=SUMMARY.names,
    )
    prices = {"gpt-x": {"input": 2.0, "output": 10.0}}
    costs = run_costs(ledgers, summary, prices).set_index("system").loc["bm25"]
    assert costs["usd"] == pytest.approx(1.8) and costs["calls"] == 6
    assert costs["accuracy"] == 0.5 and costs["correct"] == pytest.approx(48)
    assert costs["usd_per_correct"] == pytest.approx(1.8 / 48)


# --- compare -----------------------------------------------------------------------------------


def test_compare_shows_the_spread_beside_our_value_and_leaves_repeat_folders_out(tmp_path):
    """Our value and interval stay the base seed's (its 8 of 10 items; the repeat's items under
    seed14/ are not pooled with them), and the cell gets the mean and sd across seeds."""
    from mnemoflow.data.published import COLUMNS, load_published
    from mnemoflow.data.tables import QUESTION_SCORES, write_table
    from mnemoflow.report.compare import compare_published, load_run

    root = tmp_path / "results"
    keys = {"benchmark": "amemgym", "system": "awe", "protocol": "interactive", "step": 0}
    rows = [
        {**keys, "metric": "accuracy", "aggregate": a, "value": v, "n": n}
        for a, v, n in (
            ("micro", 0.8, 10),
            ("seeds_mean:micro", 0.7, 2),
            ("seeds_sd:micro", 0.1, 2),
        )
    ]
    write_table(pd.DataFrame(rows), root / "summary.parquet", SUMMARY)
    for folder, right in (("", 8), ("seed14", 6)):
        items = [
            {**keys, "question_id": f"q{i}", "question_type": "t", "metric": "accuracy",
             "value": float(i < right), "level": "answer"}
            for i in range(10)
        ]  # fmt: skip
        path = (
            root / folder / "amemgym" / "awe" / "interactive" / "step0" / "question_scores.parquet"
        )
        write_table(pd.DataFrame(items), path, QUESTION_SCORES)
    csv = tmp_path / "paper.csv"
    csv.write_text(
        ",".join(COLUMNS)
        + "\npaper,t,v1,amemgym,AWE,,interactive,mean,mean,accuracy,0.6,fixture,\n"
    )
    cells, _, _ = compare_published(load_run(root), load_published(csv), [("awe", "AWE")])
    cell = cells.iloc[0]
    assert (cell["ours"], cell["n"], cell["ci_method"]) == (0.8, 10, "wilson")
    assert (cell["seeds_mean"], cell["seeds_sd"], cell["seeds"]) == (0.7, 0.1, 2)
    # without repeats, no seed columns
    write_table(pd.DataFrame(rows[:1]), root / "summary.parquet", SUMMARY)
    cells, _, _ = compare_published(load_run(root), load_published(csv), [("awe", "AWE")])
    assert "seeds_mean" not in cells.columns
