"""``mnemoflow compare``: published vs ours, run vs run, paired tests, Kendall τ, worked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mnemoflow.cli import main
from mnemoflow.data.published import COLUMNS, load_published
from mnemoflow.data.tables import QUESTION_SCORES, SUMMARY, write_table
from mnemoflow.report.compare import (
    compare_published,
    compare_runs,
    interval,
    load_run,
    paired_systems,
    unpaired_rows,
)
from mnemoflow.report.significance import (
    cluster_paired_test,
    holm,
    kendall_tau,
    mcnemar,
    mcnemar_p,
    paired_bootstrap,
    rank_marks,
)
from mnemoflow.report.summaries import ReportError


def test_kendall_tau_worked_examples():
    """x = 1 2 3 4, y = 1 3 2 4: of the 6 pairs only (2, 3) is discordant: (5 - 1) / 6 = 2/3.

    x = 1 2 2 3, y = 1 2 3 3: concordant (1,2) (1,3) (1,4) (2,4) = 4, none discordant, one pair
    tied in x only ((2,3)) and one in y only ((3,4)): τ-b = 4 / sqrt((4 + 1) (4 + 1)) = 0.8."""
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert kendall_tau([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isnan(kendall_tau([1, 1], [1, 2]))


def test_rank_marks_as_the_amemgym_paper_marks_them():
    """First ranking .6 .7 .5 (ranks 2 1 3), second .8 .2 .5 (ranks 1 3 2): ▲1 ▼2 ▲1."""
    assert rank_marks([0.6, 0.7, 0.5], [0.8, 0.2, 0.5]) == ["▲1", "▼2", "▲1"]
    assert rank_marks([0.1, 0.2], [0.1, 0.2]) == ["—", "—"]
    # failure rates: lower is better
    assert rank_marks([0.1, 0.2], [0.3, 0.2], higher_is_better=False) == ["▼1", "▲1"]


def test_mcnemar_worked_examples():
    """b = 1 right only in A, c = 6 right only in B: P(Bin(7, 1/2) <= 1) = (1 + 7) / 128, so
    p = 2 * 8/128 = 0.125. b = 0, c = 10: p = 2 / 1024. b = c = 3: 2 * 42/64 > 1, so p = 1."""
    assert mcnemar_p(1, 6) == 0.125
    assert mcnemar_p(6, 1) == 0.125
    assert mcnemar_p(0, 10) == 2 / 1024
    assert mcnemar_p(3, 3) == 1.0
    assert mcnemar_p(0, 0) == 1.0
    test = mcnemar([1, 1, 0, 0, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1])
    assert (test.b, test.c, test.n, test.p_value) == (1, 6, 9, 0.125)
    assert test.diff == pytest.approx(5 / 9)


def test_paired_bootstrap_worked_example():
    """Differences B - A = (0, .5): a resample's mean is 0 (both items the first, prob. 1/4), .25
    (1/2) or .5 (1/4), so the 95 % interval is [0, .5], the mean difference .25, and the share of
    means <= 0 is 1/4: p = 2 * 1/4 = .5, up to the sampling error of 2000 resamples (sd .01)."""
    test = paired_bootstrap([0.5, 0.5], [0.5, 1.0])
    assert test.test == "paired-bootstrap" and test.n == 2
    assert (test.diff, test.low, test.high) == (0.25, 0.0, 0.5)
    assert abs(test.p_value - 0.5) < 0.05


# ----------------------------------------------------------------- tiny runs written here


def summary_row(system, value, n, metric="accuracy", step=0, aggregate="micro", bench="amemgym"):
    return {
        "benchmark": bench,
        "system": system,
        "protocol": "interactive",
        "step": step,
        "metric": metric,
        "aggregate": aggregate,
        "value": value,
        "n": n,
    }


def write_items(root, system, correct: list[int], bench="amemgym"):
    rows = [
        {
            "benchmark": bench,
            "system": system,
            "protocol": "interactive",
            "step": 0,
            "question_id": f"q{i}",
            "question_type": "t",
            "metric": "accuracy",
            "value": float(v),
            "level": "answer",
        }
        for i, v in enumerate(correct)
    ]
    path = root / bench / system / "interactive" / "step0" / "question_scores.parquet"
    write_table(pd.DataFrame(rows), path, QUESTION_SCORES)


def write_run(root, rows, items: dict[str, list[int]]):
    write_table(pd.DataFrame(rows), root / "summary.parquet", SUMMARY)
    for system, correct in items.items():
        write_items(root, system, correct)
    return root


PUBLISHED = [
    ("AWE-(2,4,30)", "mean", 0.6),
    ("RAG-(2,4,30)", "mean", 0.7),
    ("LLM", "mean", 0.5),
    ("AWE-(2,4,30)", "1", 0.4),
    ("Mem0-G", "mean", 0.65),
]


@pytest.fixture
def published_csv(tmp_path):
    path = tmp_path / "published" / "paper.csv"
    path.parent.mkdir()
    lines = [",".join(COLUMNS)]
    for row, period, value in PUBLISHED:
        lines.append(
            f'paper,t,v1,amemgym,"{row}",,interactive,{period},mean,accuracy,{value},fixture,'
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def run_a(tmp_path):
    """awe 8 of 10 right, rag 2 of 10 (both with items), native .5 of 10 (summary only)."""
    rows = [summary_row("awe", 0.8, 10), summary_row("rag", 0.2, 10)]
    rows.append(summary_row("native", 0.5, 10))
    return write_run(tmp_path / "a", rows, {"awe": [1] * 8 + [0] * 2, "rag": [1] * 2 + [0] * 8})


MAP = [("awe", "AWE-(2,4,30)"), ("rag", "RAG-(2,4,30)"), ("native", "LLM")]


def test_published_vs_ours_values_intervals_and_flags(run_a, published_csv):
    """awe: 8/10 = .8, Wilson [0.490, 0.943] holds the published .6: diff +.2, not outside.
    rag: 2/10 = .2, Wilson [0.057, 0.510] misses the published .7: diff -.5, outside.
    native (as LLM): no items, so the Wilson interval of .5 out of n = 10: [0.237, 0.763]."""
    cells, _, _ = compare_published(load_run(run_a), load_published(published_csv), MAP)
    by = cells.set_index(["row", "period"])
    awe = by.loc[("AWE-(2,4,30)", "mean")]
    assert (awe["system"], awe["ours"], awe["published"]) == ("awe", 0.8, 0.6)
    assert (round(awe["ci_low"], 3), round(awe["ci_high"], 3)) == (0.490, 0.943)
    assert (awe["ci_method"], awe["outside"], awe["n"]) == ("wilson", "no", 10)
    assert awe["diff"] == pytest.approx(0.2)
    rag = by.loc[("RAG-(2,4,30)", "mean")]
    assert (round(rag["ci_low"], 3), round(rag["ci_high"], 3)) == (0.057, 0.510)
    assert rag["outside"] == "yes" and rag["diff"] == pytest.approx(-0.5)
    llm = by.loc[("LLM", "mean")]
    assert (round(llm["ci_low"], 3), round(llm["ci_high"], 3)) == (0.237, 0.763)
    assert (llm["ci_method"], llm["outside"]) == ("wilson-n", "no")
    assert by.loc[("AWE-(2,4,30)", "1"), "note"] == "not in the run"
    assert by.loc[("Mem0-G", "mean"), "note"] == "not paired"
    assert math.isnan(by.loc[("Mem0-G", "mean"), "ours"])


def test_published_vs_ours_rank_agreement(run_a, published_csv):
    """Theirs: rag .7 > awe .6 > LLM .5; ours: awe .8 > native .5 > rag .2. Pairs (awe, rag) and
    (rag, LLM) are discordant, (awe, LLM) concordant: τ = (1 - 2) / 3. Rank changes (ours
    against the paper's): rag 1 -> 3 ▼2, awe 2 -> 1 ▲1, LLM 3 -> 2 ▲1."""
    _, taus, ranks = compare_published(load_run(run_a), load_published(published_csv), MAP)
    assert taus[["table", "n"]].values.tolist() == [["t", 3]]
    assert taus["tau"].iloc[0] == pytest.approx(-1 / 3)
    marks = dict(zip(ranks["row"], ranks["rank_change"], strict=True))
    assert marks == {"RAG-(2,4,30)": "▼2", "AWE-(2,4,30)": "▲1", "LLM": "▲1"}


def test_items_that_do_not_reproduce_the_score_give_no_interval(tmp_path, published_csv):
    rows = [summary_row("awe", 0.7, 10)]  # the items say 8 of 10
    root = write_run(tmp_path / "r", rows, {"awe": [1] * 8 + [0] * 2})
    cells, _, _ = compare_published(load_run(root), load_published(published_csv), MAP[:1])
    awe = cells[(cells["row"] == "AWE-(2,4,30)") & (cells["period"] == "mean")].iloc[0]
    assert (awe["ci_method"], awe["outside"]) == ("mismatch", "")


def test_compare_two_runs(tmp_path):
    """A: x right on items 0-9 of 20 (.5, Wilson [0.299, 0.701]), y on items 0-5 (.3).
    B: x wrong on item 0 and right on 1-15 (.75): b = 1 item right only in A, c = 6 (items
    10-15) right only in B, McNemar p = 0.125; .75 lies outside A's interval. B's y .2 keeps
    x above y, so τ = 1 and no rank changes."""
    a = write_run(
        tmp_path / "a",
        [summary_row("x", 0.5, 20), summary_row("y", 0.3, 20)],
        {"x": [1] * 10 + [0] * 10, "y": [1] * 6 + [0] * 14},
    )
    b = write_run(
        tmp_path / "b",
        [summary_row("x", 0.75, 20), summary_row("y", 0.2, 20)],
        {"x": [0] + [1] * 15 + [0] * 4, "y": [1] * 4 + [0] * 16},
    )
    cells, taus, ranks = compare_runs(load_run(a), load_run(b))
    x = cells.set_index("system").loc["x"]
    assert (x["a_value"], x["b_value"], x["diff"], x["outside"]) == (0.5, 0.75, 0.25, "yes")
    assert (round(x["a_low"], 3), round(x["a_high"], 3)) == (0.299, 0.701)
    assert (x["test"], x["b"], x["c"], x["p_value"], x["n_paired"]) == ("mcnemar", 1, 6, 0.125, 20)
    assert taus["tau"].tolist() == [1.0]
    assert ranks["rank_change"].tolist() == ["—", "—"]


def test_paired_tests_between_systems_of_one_run(tmp_path):
    """x right on items 0-9, y on 0-5: items 6-9 are right only in x (b = 4), none only in y
    (c = 0): p = 2 * (1/2)^4 = 0.125; y - x = -4/20."""
    root = write_run(
        tmp_path / "a",
        [summary_row("x", 0.5, 20), summary_row("y", 0.3, 20), summary_row("z", 0.1, 20)],
        {"x": [1] * 10 + [0] * 10, "y": [1] * 6 + [0] * 14},
    )
    paired = paired_systems(load_run(root))
    assert len(paired) == 1  # z has no items
    row = paired.iloc[0]
    assert (row["system_a"], row["system_b"], row["test"]) == ("x", "y", "mcnemar")
    assert (row["b"], row["c"], row["p_value"]) == (4, 0, 0.125)
    assert row["diff"] == pytest.approx(-0.2)


def amemgym_rows(user_correct: dict[str, list[int]], period: int) -> pd.DataFrame:
    rows = []
    for user, correct in user_correct.items():
        for i, right in enumerate(correct):
            rows.append(
                {
                    "user_id": user,
                    "period": period,
                    "question_index": i,
                    "question_id": f"q{i}",
                    "correct": float(right),
                    "random": 0.25,
                    "upper_bound": 0.75,
                }
            )
    return pd.DataFrame(rows)


def test_amemgym_memory_score_interval_resamples_users(tmp_path):
    """Two users, two questions each, periods 0 and 1 (random .25, upper bound .75): user u1
    answers 1 and 2 right (memory scores (.5 - .25) / .5 = .5 and 1.5), u2 0 and 1 (-.5, .5).
    The mean over the four (user, period) pairs is .5; resampling users gives u1 twice (mean 1),
    u2 twice (0) or one of each (.5), so the interval is [0, 1]."""
    root = tmp_path / "run"
    for period, per_user in ((0, {"u1": [1, 0], "u2": [0, 0]}), (1, {"u1": [1, 1], "u2": [1, 0]})):
        path = (
            root / "amemgym" / "awe" / "interactive" / f"step{period}" / "question_scores.parquet"
        )
        path.parent.mkdir(parents=True)
        amemgym_rows(per_user, period).to_parquet(path)
    rows = [
        summary_row("awe", 0.5, 4, "memory_score", step=1, aggregate="mean_over_periods"),
        summary_row("awe", 0.5, 8, "accuracy", step=1, aggregate="mean_over_periods"),
    ]
    write_table(pd.DataFrame(rows), root / "summary.parquet", SUMMARY)
    published = tmp_path / "p.csv"
    published.write_text(
        ",".join(COLUMNS)
        + "\npaper,t,v1,amemgym,AWE,,interactive,mean,mean,memory_score,1.2,fixture,\n",
        encoding="utf-8",
    )
    cells, _, _ = compare_published(load_run(root), load_published(published), [("awe", "AWE")])
    cell = cells.iloc[0]
    assert (cell["ours"], cell["ci_method"], cell["n"]) == (0.5, "cluster-bootstrap", 4)
    assert (cell["ci_low"], cell["ci_high"], cell["outside"]) == (0.0, 1.0, "yes")


def test_cli_published_runs_and_preset(run_a, published_csv, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["compare", str(run_a), "--published", "paper/t"]
    args += ["--published-dir", str(published_csv), "--out", str(out)]
    args += [f"--map={ours}={theirs}" for ours, theirs in MAP]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "5 published cells; 3 paired with the run" in text
    assert "outside our 95 % interval in 1 of the 3" in text
    assert "| paper | t | RAG-(2,4,30) | rag |" in text
    assert (out / "compare.md").read_text(encoding="utf-8") == text
    assert len(pd.read_csv(out / "published.tsv", sep="\t")) == 5
    # a preset names the tables and the pairs
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "mine.yaml").write_text(
        "compare: {published: paper/t}\n"
        "systems:\n  awe: {type: agentic_external, published_as: 'AWE-(2,4,30)'}\n",
        encoding="utf-8",
    )
    args = ["compare", str(run_a), "--preset", "mine", "--presets", str(presets)]
    assert main([*args, "--published-dir", str(published_csv)]) == 0
    assert "5 published cells; 1 paired with the run" in capsys.readouterr().out
    assert main(["compare", str(run_a), "--preset", "nope", "--presets", str(presets)]) == 2
    err = capsys.readouterr().err
    assert "nope.yaml: no such preset (known: mine)" in err and "\n" not in err.strip()


def test_cli_two_runs_and_errors(run_a, tmp_path, capsys):
    assert main(["compare", str(run_a), str(run_a), "--paired"]) == 0
    text = capsys.readouterr().out
    assert "3 shared summary rows; B's value outside A's 95 % interval in 0" in text
    assert "| amemgym | interactive | 0 | accuracy | micro | awe | rag | 0.800 | 0.200 |" in text
    assert main(["compare", str(tmp_path / "none")]) == 2
    assert "no summary table" in capsys.readouterr().err
    assert main(["compare", str(run_a), "--published", "amemgym", "--map", "bad"]) == 2
    assert "expected OURS=THEIRS" in capsys.readouterr().err


def test_report_section_published_vs_ours(run_a, published_csv):
    """``mnemoflow report --published`` adds the section and its tables to the page's folder."""
    args = ["report", "--results", str(run_a), "--published", "paper/t"]
    args += ["--published-dir", str(published_csv)]
    args += [f"--map={ours}={theirs}" for ours, theirs in MAP]
    assert main(args) == 0
    page = (run_a / "report.html").read_text(encoding="utf-8")
    assert "Published vs ours</h2>" in page
    assert "<b>outside our 95 % interval</b> in 1 of the 3 with an interval" in page
    assert "[0.057, 0.510]" in page  # rag's Wilson interval beside the published .7
    assert "Rank agreement (Kendall τ-b)" in page
    cells = pd.read_csv(run_a / "report" / "published_cells.tsv", sep="\t")
    assert len(cells) == 5


def test_published_as_labels_a_system_without_being_a_parameter(
    run_a, published_csv, tmp_path, capsys
):
    """``systems.<name>.published_as`` passes the config schema and the system's own parameter
    check, is no stage's parameter (a change re-runs nothing), and pairs the system in compare."""
    from pathlib import Path

    import yaml

    from mnemoflow.config_schema import check_config
    from mnemoflow.errors import ConfigError
    from mnemoflow.memory.base import check_systems, stage_spec, without_labels

    spec = {"type": "bm25_message", "top_k": 5, "published_as": "AWE-(2,4,30)"}
    check_systems({"awe": spec})
    repo = Path(__file__).resolve().parents[1]
    default = yaml.safe_load((repo / "config.yaml").read_text(encoding="utf-8"))
    default["systems"]["bm25_message"]["published_as"] = "BM25"
    check_config(default, repo / "schemas" / "config.schema.yaml")
    default["systems"]["bm25_message"]["published_as"] = 3
    with pytest.raises(ConfigError, match="systems.bm25_message.published_as: 3 is not of type"):
        check_config(default, repo / "schemas" / "config.schema.yaml")
    assert without_labels(spec) == {"type": "bm25_message", "top_k": 5}
    assert "published_as" not in {**stage_spec(spec, "ingest"), **stage_spec(spec, "query")}
    config = tmp_path / "config.yaml"
    config.write_text("systems:\n  awe: {type: bm25_message, published_as: 'AWE-(2,4,30)'}\n")
    args = ["compare", str(run_a), "--published", "paper/t", "--config", str(config)]
    assert main([*args, "--published-dir", str(published_csv)]) == 0
    assert "5 published cells; 1 paired with the run" in capsys.readouterr().out


def test_our_on_to_off_policy_rank_change_beside_the_published_one(tmp_path):
    """On-policy x .3 > y .2 (ranks 1, 2); off-policy y .2 > x .1 (x 2nd, y 1st). Our changes,
    on rank - off rank (▲ = higher off-policy): x 1 - 2 = -1, y 2 - 1 = +1; against the printed
    -3 and +2 the differences are +2 and -1."""
    root = tmp_path / "run"
    rows = []
    for system, on, off in (("x", 0.3, 0.1), ("y", 0.2, 0.2)):
        for protocol, value in (("interactive", on), ("interactive_replay", off)):
            row = summary_row(system, value, 4, "memory_score", 2, "mean_over_periods")
            rows.append({**row, "protocol": protocol})
    write_table(pd.DataFrame(rows), root / "summary.parquet", SUMMARY)
    published = tmp_path / "p.csv"
    lines = [",".join(COLUMNS)]
    for row, on, off, change in (("X", 0.29, 0.25, -3), ("Y", 0.27, 0.27, 2)):
        for protocol, metric, value in (
            ("interactive", "memory_score", on),
            ("interactive_replay", "memory_score", off),
            ("interactive", "rank_change", change),
        ):
            lines.append(
                f"amemgym,onoff,v1,amemgym,{row},,{protocol},mean,mean,{metric},{value},s,"
            )
    published.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cells, taus, _ = compare_published(
        load_run(root), load_published(published), [("x", "X"), ("y", "Y")]
    )
    change = cells[cells["metric"] == "rank_change"].set_index("row")
    assert change["ours"].to_dict() == {"X": -1.0, "Y": 1.0}
    assert change["diff"].to_dict() == {"X": 2.0, "Y": -1.0}
    assert set(change["n"]) == {2}
    assert len(taus) == 2  # one per protocol; rank_change cells are not ranked themselves


def test_unreadable_item_tables_are_named(tmp_path, published_csv):
    root = write_run(tmp_path / "r", [summary_row("awe", 0.5, 2)], {})
    odd = root / "amemgym" / "awe" / "interactive" / "step0" / "question_scores.parquet"
    odd.parent.mkdir(parents=True)
    pd.DataFrame({"question": ["q1"], "score": [1.0]}).to_parquet(odd)
    with pytest.raises(ValueError, match=r"step0/question_scores.parquet: columns \['question'"):
        load_run(root)


def test_two_runs_are_compared_on_scores_not_on_timings_or_the_spread_across_seeds(tmp_path):
    """The footprint (a lower latency is better, and it moves with the machine's load) and the
    seeds_mean / seeds_sd rows (not proportions) are neither compared, ranked nor flagged."""
    extra = [
        summary_row("x", 50.0, 20, metric="retrieval_ms_p50"),
        summary_row("y", 1.0, 20, metric="retrieval_ms_p50"),
        summary_row("x", 120.0, 4, metric="memory_kb"),
        summary_row("x", 0.02, 3, aggregate="seeds_sd:micro"),
        summary_row("x", 0.5, 3, aggregate="seeds_mean:micro"),
    ]
    runs = [
        write_run(
            tmp_path / name,
            [summary_row("x", 0.5, 20), summary_row("y", 0.3, 20), *extra],
            {"x": [1] * 10 + [0] * 10, "y": [1] * 6 + [0] * 14},
        )
        for name in ("a", "b")
    ]
    cells, taus, ranks = compare_runs(*(load_run(r) for r in runs))
    assert set(cells["metric"]) == {"accuracy"} and set(cells["aggregate"]) == {"micro"}
    assert set(taus["metric"]) == {"accuracy"} and set(ranks["metric"]) == {"accuracy"}


# ----------------------------------------------------------------- clustered items, Holm


def test_holm_worked_example():
    """m = 3 tests: the smallest p times 3, the next times 2 (kept non-decreasing), the last
    times 1: (.01, .04, .03) -> (.03, .06, .06); an untested pair (NaN) stays out of the family."""
    assert holm([0.01, 0.04, 0.03, math.nan])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(holm([0.01, 0.04, 0.03, math.nan])[3])
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1


def test_cluster_permutation_worked_example():
    """Differences B - A per user: u1 (1, 1), u2 (1, 0), u3 (0, 1, 0): user sums 2, 1, 1 over 7
    items, mean 4/7. Flipping each user's sign gives |±2 ±1 ±1| / 7 in {4, 2, 2, 0, 0, 2, 2, 4}
    / 7: 2 of the 8 patterns reach 4/7, p = .25 (McNemar, taking the 7 items as independent,
    would say 2 / 2^4 = .125). Resampling users: all u3 gives 3/9, all u1 6/6, each with
    probability 1/27 > 2.5 %, so the interval is [1/3, 1]."""
    a = [0] * 7
    b = [1, 1, 1, 0, 0, 1, 0]
    users = ["u1", "u1", "u2", "u2", "u3", "u3", "u3"]
    test = cluster_paired_test(a, b, users)
    assert (test.test, test.n, test.clusters) == ("cluster-permutation", 7, 3)
    assert test.diff == pytest.approx(4 / 7) and test.p_value == 0.25
    assert (test.low, test.high) == (pytest.approx(1 / 3), 1.0)
    assert mcnemar(a, b).p_value == 0.125
    same = cluster_paired_test(a, a, users)
    assert same.p_value == 1.0 and same.diff == 0.0


def _amemgym_run(root, systems: dict[str, dict[str, list[int]]], periods=(0,)):
    """AMemGym question scores of ``systems`` (user -> right / wrong per question, the same in
    every period) and their summary rows (accuracy and memory score at each period)."""
    rows = []
    for system, per_user in systems.items():
        for period in periods:
            path = root / "amemgym" / system / "interactive" / f"step{period}"
            path.mkdir(parents=True)
            frame = amemgym_rows(per_user, period)
            frame.to_parquet(path / "question_scores.parquet")
            score = (frame.groupby("user_id")["correct"].mean() - 0.25) / 0.5
            rows.append(summary_row(system, frame["correct"].mean(), len(frame), step=period))
            rows.append(summary_row(system, score.mean(), len(score), "memory_score", step=period))
        last = max(periods)
        rows.append(
            summary_row(
                system,
                score.mean(),
                len(score) * len(periods),
                "memory_score",
                step=last,
                aggregate="mean_over_periods",
            )  # fmt: skip
        )
    write_table(pd.DataFrame(rows), root / "summary.parquet", SUMMARY)
    return load_run(root)


def test_paired_tests_over_users_are_holm_corrected_across_the_pairs(tmp_path):
    """a and c answer nothing right, b as in the worked example above (user sums 2, 1, 1):
    a-b and b-c have p = .25 over users, a-c p = 1; Holm over the three pairs of the metric:
    .25 * 3 = .75, then max(.75, .25 * 2) = .75, then max(.75, 1) = 1."""
    nothing = {"u1": [0, 0], "u2": [0, 0], "u3": [0, 0, 0]}
    some = {"u1": [1, 1], "u2": [1, 0], "u3": [0, 1, 0]}
    run = _amemgym_run(tmp_path, {"a": nothing, "b": some, "c": nothing})
    paired = paired_systems(run)
    accuracy = paired[paired["metric"] == "accuracy"].set_index(["system_a", "system_b"])
    assert set(accuracy["test"]) == {"cluster-permutation"}
    assert accuracy["clusters"].tolist() == [3, 3, 3]
    assert accuracy["p_value"].to_dict() == {("a", "b"): 0.25, ("a", "c"): 1.0, ("b", "c"): 0.25}
    assert accuracy["p_holm"].to_dict() == {("a", "b"): 0.75, ("a", "c"): 1.0, ("b", "c"): 0.75}
    assert set(accuracy["significant"]) == {"no"}
    assert accuracy.loc[("a", "b"), "diff"] == pytest.approx(4 / 7)


def test_a_normalized_score_gets_no_wilson_interval(tmp_path):
    """Memory scores (accuracy - .25) / .5 of 1 (u1: 3 of 4) and 0 (u2: 1 of 4): values 0 and 1,
    but not a proportion: the interval resamples the two users (means 0, .5, .5, 1), [0, 1],
    not Wilson's [.095, .905] for 1 of 2."""
    run = _amemgym_run(tmp_path / "r", {"awe": {"u1": [1, 0, 1, 1], "u2": [1, 0, 0, 0]}})
    row = next(run.summary[run.summary["metric"] == "memory_score"].itertuples(index=False))
    assert (row.aggregate, row.value, row.n) == ("micro", 0.5, 2)
    low, high, method = interval(run, row)
    assert (low, high, method) == (0.0, 1.0, "cluster-bootstrap")


def test_an_interval_over_users_who_all_score_alike_is_degenerate_not_zero_width(tmp_path):
    """Every user scores .5 in every period: the resampled means cannot vary; the interval is
    marked degenerate, without bounds, and the published .9 is not called outside it."""
    run = _amemgym_run(tmp_path / "r", {"awe": {"u1": [1, 0], "u2": [0, 1]}}, periods=(0, 1))
    published = tmp_path / "p.csv"
    published.write_text(
        ",".join(COLUMNS)
        + "\npaper,t,v1,amemgym,AWE,,interactive,mean,mean,memory_score,0.9,fixture,\n",
        encoding="utf-8",
    )
    cells, _, _ = compare_published(run, load_published(published), [("awe", "AWE")])
    cell = cells.iloc[0]
    assert (cell["ours"], cell["n"], cell["ci_method"]) == (0.5, 4, "degenerate")
    assert math.isnan(cell["ci_low"]) and math.isnan(cell["ci_high"])
    assert cell["outside"] == ""


# --- per question type, several benchmarks, unpaired rows --------------------------------------


def _locomo_run(root, rows):
    """A summary of static QA runs: (benchmark, system, aggregate, metric, value, n) per row."""
    summary = [
        {"benchmark": b, "system": s, "protocol": "qa", "step": 0, "metric": m, "aggregate": a,
         "value": v, "n": n}
        for b, s, a, m, v, n in rows
    ]  # fmt: skip
    write_table(pd.DataFrame(summary), root / "summary.parquet", SUMMARY)
    return load_run(root)


def _locomo_published(tmp_path, cells):
    """Published rows (table, row, aggregate, metric, value) of benchmark locomo."""
    path = tmp_path / "locomo.csv"
    lines = [",".join(COLUMNS)]
    for table, row, aggregate, metric, value in cells:
        lines.append(
            f"locomo,{table},locomo10,locomo,{row},,qa,mean,{aggregate},{metric},{value},s,"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_published(path)


def test_a_per_type_cell_pairs_with_the_same_type_and_each_system_with_its_own_benchmark(tmp_path):
    """`mean` pairs with our micro row, `type:temporal` with our type:temporal row; long_context
    runs on one benchmark, dense_5 on another, and each is compared where it runs. Tables 3's
    Observation row has no counterpart: listed once, with the preset's reason."""
    run = _locomo_run(
        tmp_path,
        [
            ("lc", "long_context", "micro", "f1", 0.36, 10),
            ("lc", "long_context", "type:temporal", "f1", 0.25, 4),
            ("rag", "dense_5", "micro", "f1", 0.40, 10),
            ("rag", "dense_5", "type:temporal", "f1", 0.30, 4),
        ],
    )
    published = _locomo_published(
        tmp_path,
        [
            ("t2", "gpt 16K", "mean", "f1", 0.359),
            ("t2", "gpt 16K", "type:temporal", "f1", 0.243),
            ("t3", "Dialog top-5", "mean", "f1", 0.388),
            ("t3", "Dialog top-5", "type:temporal", "f1", 0.354),
            ("t3", "Observation top-5", "mean", "f1", 0.433),
            ("t3", "Observation top-5", "type:temporal", "f1", 0.407),
        ],
    )
    pairs = [("long_context", "gpt 16K"), ("dense_5", "Dialog top-5")]
    reasons = {"Observation top-5": "observations are not a mnemoflow system"}
    cells, taus, _ = compare_published(run, published, pairs, unpaired=reasons)
    by = cells.set_index(["row", "aggregate"])
    assert by.loc[("gpt 16K", "mean"), "ours"] == 0.36
    assert by.loc[("gpt 16K", "type:temporal"), "ours"] == 0.25
    assert by.loc[("Dialog top-5", "type:temporal"), "ours"] == 0.30
    assert by.loc[("Dialog top-5", "mean"), "diff"] == pytest.approx(0.40 - 0.388)
    assert math.isnan(by.loc[("Observation top-5", "mean"), "ours"])
    assert list(taus["table"]) == []  # one paired row per table: no ranking to agree on
    alone = unpaired_rows(cells)
    assert alone.to_dict("records") == [
        {"paper": "locomo", "table": "t3", "row": "Observation top-5", "cells": 2,
         "reason": "observations are not a mnemoflow system"},
    ]  # fmt: skip


def test_a_system_on_several_benchmarks_needs_the_benchmark_named(tmp_path):
    run = _locomo_run(
        tmp_path,
        [("a", "dense_5", "micro", "f1", 0.4, 10), ("b", "dense_5", "micro", "f1", 0.5, 10)],
    )
    published = _locomo_published(tmp_path, [("t3", "Dialog top-5", "mean", "f1", 0.388)])
    with pytest.raises(ReportError, match=r"dense_5 runs on several benchmarks \(a, b\)"):
        compare_published(run, published, [("dense_5", "Dialog top-5")])
    cells, _, _ = compare_published(run, published, [("dense_5", "Dialog top-5")], benchmark="b")
    assert cells["ours"].tolist() == [0.5]
    with pytest.raises(ReportError, match=r"no benchmark 'locomo' .*name it with --benchmark"):
        compare_published(run, published)  # nothing paired, no benchmark of that name
