"""The HTML report: confidence intervals, tables, figures and provenance from result tables."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from mnemoflow.data.tables import write_table
from mnemoflow.llm.ledger import Ledger
from mnemoflow.report import build_report
from mnemoflow.report.provenance import redact
from mnemoflow.report.screenshot import find_chromium, next_height, screenshot
from mnemoflow.report.stats import bootstrap_interval, mean_interval, wilson_interval
from mnemoflow.report.summaries import (
    ReportError,
    check_diagnosis,
    diagnosis_overall,
    ledger_tables,
    load_ledger,
    run_costs,
    with_intervals,
    writer_rates,
)
from mnemoflow.report.summary import summary_markdown
from tests.system_packages import apt_install

# --- worked examples ---------------------------------------------------------------------------


def test_wilson_interval_matches_the_textbook_values():
    # 8 of 10: p = 0.8, centre (0.8 + 1.92/10) / 1.384 = 0.7167, half-width 0.2266.
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    # At 0/n the interval still has width (the normal approximation would give [0, 0]).
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    # n/n ends exactly at 1 (rounding must not leave the score outside its interval).
    assert all(wilson_interval(float(n), n)[1] == 1.0 for n in range(1, 200))


def test_mean_interval_picks_wilson_for_0_1_values_and_bootstrap_otherwise():
    binary = mean_interval([1, 1, 0, 1])
    assert (binary.method, binary.mean, binary.n) == ("wilson", 0.75, 4)
    assert (binary.low, binary.high) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    graded = mean_interval([0.5, 1.0, 0.0, 0.25, 0.75, float("nan")])
    assert (graded.method, graded.mean, graded.n) == ("bootstrap", 0.5, 5)
    assert graded.low < 0.5 < graded.high
    # Seed 0, 2000 resamples of 5 values: the 2.5th / 97.5th percentiles of the means.
    assert (graded.low, graded.high) == pytest.approx((0.2, 0.8))
    # Seeded: the same values give the same interval.
    assert bootstrap_interval(np.array([0.5, 1.0, 0.0])) == bootstrap_interval(
        np.array([0.5, 1.0, 0.0])
    )


def _judgement(system, qid, qtype, value, step=0, metric="accuracy"):
    return {
        "benchmark": "bench",
        "system": system,
        "protocol": "static_qa",
        "step": step,
        "question_id": qid,
        "question_type": qtype,
        "judge": "offline-heuristic/qa-v1",
        "metric": metric,
        "value": float(value),
        "raw_reply": "yes" if value else "no",
        "parse_ok": True,
    }


def _score(system, aggregate, value, n, step=0, metric="accuracy"):
    return {
        "benchmark": "bench",
        "system": system,
        "protocol": "static_qa",
        "step": step,
        "metric": metric,
        "aggregate": aggregate,
        "value": value,
        "n": n,
    }


def test_intervals_are_attached_only_where_judgements_reproduce_the_score():
    judgements = pd.DataFrame(
        [_judgement("a", f"q{i}", "t1" if i < 2 else "t2", v) for i, v in enumerate([1, 1, 0, 1])]
    )
    summary = pd.DataFrame(
        [
            _score("a", "micro", 0.75, 4),
            _score("a", "macro", 0.75, 4),
            _score("a", "type:t1", 1.0, 2),
            _score("b", "micro", 0.5, 4),  # no judgements for system b
            _score("b", "micro", 12.5, 4, metric="context_k"),  # not a proportion
            _score("a", "micro", 0.80, 4, step=1),  # judgements exist only for step 0
        ]
    )
    judgements = pd.concat(
        [judgements, pd.DataFrame([_judgement("a", "q0", "t1", 1, step=1)])], ignore_index=True
    )
    out = with_intervals(summary, judgements).set_index(["system", "step", "aggregate"])
    micro = out.loc[("a", 0, "micro")]
    assert micro["ci_method"] == "wilson"
    assert (micro["ci_low"], micro["ci_high"]) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    # 2/2 in type t1: Wilson (0.3424, 1.0).
    assert out.loc[("a", 0, "type:t1"), "ci_low"] == pytest.approx(0.3424, abs=1e-4)
    assert out.loc[("a", 0, "macro"), "ci_method"] == ""
    # A proportion without judgements: Wilson of 0.5 out of n = 4 is (0.1500, 0.8500).
    b = out.loc[("b", 0, "micro")].set_index("metric")
    assert b.loc["accuracy", "ci_method"] == "wilson-n"
    assert (b.loc["accuracy", "ci_low"], b.loc["accuracy", "ci_high"]) == pytest.approx(
        (0.1500, 0.8500), abs=1e-4
    )
    assert b.loc["context_k", "ci_method"] == "no judgements"
    assert out.loc[("a", 1, "micro"), "ci_method"] == "mismatch"  # 1 judgement vs n=4, 0.8
    assert math.isnan(out.loc[("a", 1, "micro"), "ci_low"])


def _diagnosis(rows):
    columns = ["benchmark", "system", "step", "question_type", "failure", "rate", "n"]
    return pd.DataFrame(rows, columns=columns)


def test_diagnosis_overall_weights_types_by_their_questions():
    # Type a: 10 questions, 10 % write and 20 % read failures; type b: 30 questions, 30 % write
    # and 10 % utilization. Overall: write (1 + 9) / 40 = 0.25, read 2 / 40 = 0.05,
    # utilization 3 / 40 = 0.075. Step 0 rows are superseded by the last step (1).
    diagnosis = _diagnosis(
        [
            ("g", "s", 1, "a", "write", 0.1, 10),
            ("g", "s", 1, "a", "read", 0.2, 10),
            ("g", "s", 1, "b", "write", 0.3, 30),
            ("g", "s", 1, "b", "utilization", 0.1, 30),
            ("g", "s", 0, "a", "write", 0.9, 10),
        ]
    )
    check_diagnosis(diagnosis, "diag.parquet")
    overall = diagnosis_overall(diagnosis).set_index("failure")
    assert overall["rate"].to_dict() == pytest.approx(
        {
            "write": 0.25,
            "read": 0.05,
            "utilization": 0.075,
            "correct": 0.0,
            "undiagnosable": 0.0,
            "unjudged": 0.0,
        }
    )
    assert set(overall["n"]) == {40} and set(overall["step"]) == {1}


def test_diagnosis_prefers_the_producers_all_rows():
    diagnosis = _diagnosis(
        [
            ("g", "s", 0, "all", "write", 0.2, 50),
            ("g", "s", 0, "all", "read", 0.1, 50),
            ("g", "s", 0, "a", "write", 0.9, 5),
        ]
    )
    overall = diagnosis_overall(diagnosis).set_index("failure")["rate"].to_dict()
    assert overall == pytest.approx(
        {"write": 0.2, "read": 0.1, "utilization": 0.0}
        | {"correct": 0.0, "undiagnosable": 0.0, "unjudged": 0.0}
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (("g", "s", 0, "all", "retrieval", 0.1, 5), "'failure' must be one of"),
        (("g", "s", 0, "all", "read", 1.5, 5), "'rate' must be within 0..1, got 1.5"),
    ],
)
def test_bad_diagnosis_rows_are_named(row, message):
    with pytest.raises(ReportError, match=re.escape(message)) as error:
        check_diagnosis(_diagnosis([row]), "diag.parquet")
    assert str(error.value).startswith("diag.parquet: row 0 (g/s step 0)")


def test_diagnosis_stages_must_be_exclusive():
    rows = [("g", "s", 0, "all", "write", 0.7, 5), ("g", "s", 0, "all", "read", 0.6, 5)]
    with pytest.raises(ReportError, match="add up to 1.300 > 1"):
        check_diagnosis(_diagnosis(rows), "diag.parquet")


def _ledger_json(path, role, task, model, calls, hits, tokens_in, tokens_out):
    """A ledger whose cache misses processed ``tokens_in`` / ``tokens_out`` tokens in all."""
    ledger = Ledger()
    misses = calls - hits
    for i in range(calls):
        ledger.record(
            role,
            task,
            model=model,
            cache_hit=i < hits,
            tokens_in=tokens_in // misses,
            tokens_out=tokens_out // misses,
            latency_s=0.5,
        )
    path.write_text(ledger.to_json({"rule": task}))
    return path


def test_ledger_tables_sum_tokens_and_price_only_known_models(tmp_path):
    paid = _ledger_json(tmp_path / "a.json", "agent", "answer", "gpt-x", 10, 4, 1200, 600)
    free = _ledger_json(tmp_path / "b.json", "judge", "judge_qa", "offline-heuristic", 5, 0, 50, 5)
    prices = {"gpt-x": {"input": 2.0, "output": 8.0}}  # USD per million tokens
    per_file, per_task = ledger_tables([load_ledger(paid), load_ledger(free)], prices)
    agent = per_task.set_index("role").loc["agent"]
    # Cache hits cost nothing: 1200 tokens in at $2/M + 600 out at $8/M = 0.0024 + 0.0048 USD.
    assert agent["cost_usd"] == pytest.approx(0.0072)
    assert (agent["calls"], agent["cache_hits"], agent["hit_rate"]) == (10, 4, 0.4)
    assert math.isnan(per_task.set_index("role").loc["judge", "cost_usd"])
    assert per_file["tokens_in"].sum() == 1250


def test_run_costs_price_each_run_beside_its_accuracy_and_per_correct_answer(tmp_path):
    """A run's ledgers (named by their folders) are summed and priced with the config's prices
    over the shipped table, keyed by the model the role binds; the offline judge is free."""
    shard = tmp_path / "results" / "locomo" / "bm25" / "qa" / "step0" / "shard0"
    shard.mkdir(parents=True)
    roles = {"agent": {"backend": "openai", "model": "gpt-x"}, "judge": {"backend": "offline"}}
    for name, role, model in (("answers", "agent", "gpt-x-2025-01-01"),
                              ("judgements", "judge", "offline-heuristic")):  # fmt: skip
        ledger = Ledger()
        for _ in range(3):
            ledger.record(role, name, model=model, cache_hit=False, tokens_in=100_000,
                          tokens_out=10_000, latency_s=0.1, cached_in=50_000)  # fmt: skip
        (shard / f"{name}.ledger.json").write_text(ledger.to_json({"roles": roles}))
    summary = pd.DataFrame(
        [("locomo", "bm25", "qa", 0, "accuracy", "micro", 0.5, 60)],
        columns=["benchmark", "system", "protocol", "step", "metric", "aggregate", "value", "n"],
    )
    ledgers = [load_ledger(path) for path in sorted(shard.glob("*.json"))]
    prices = {"gpt-x": {"input": 2.0, "cached_input": 1.0, "output": 10.0}}
    costs = run_costs(ledgers, summary, prices).set_index("system")
    # 3 calls x (50k fresh x $2 + 50k cached x $1 + 10k out x $10) / 1M = 3 x 0.25 = $0.75
    assert costs.loc["bm25", "usd"] == pytest.approx(0.75)
    assert costs.loc["bm25", "calls"] == 6 and costs.loc["bm25", "accuracy"] == 0.5
    assert costs.loc["bm25", "usd_per_correct"] == pytest.approx(0.75 / 30)
    text = summary_markdown(summary, costs=run_costs(ledgers, summary, prices))
    assert "## Cost" in text
    assert "| locomo | bm25 | qa | accuracy 0.500 | 0.7500 | 0.0250 | 0 |" in text
    # without a price for the agent's model the run's cost is unknown, not smaller
    assert math.isnan(run_costs(ledgers, summary).set_index("system").loc["bm25", "usd"])


def test_a_malformed_ledger_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"models": {}, "totals": {}, "by_role_task": {"agent": {}}}))
    with pytest.raises(ReportError, match=r"bad.json: by_role_task key 'agent' is not 'role/task'"):
        load_ledger(path)


def test_redact_masks_key_values_but_keeps_variable_names():
    config = {"models": {"agent": {"api_key_env": "OPENAI_API_KEY", "api_key": "sk-live"}}}
    assert redact(config) == {
        "models": {"agent": {"api_key_env": "OPENAI_API_KEY", "api_key": "***"}}
    }


# --- a whole report ------------------------------------------------------------------------------

SYSTEMS = ["none", "full_context", "bm25_message", "bm25_session"]
SKILL = {"none": 0.15, "full_context": 0.55, "bm25_message": 0.7, "bm25_session": 0.62}


def make_results(folder):
    """Judgements and the summary they imply for two benchmarks, one of them over four steps."""
    rng = np.random.default_rng(7)
    types = {
        "locomo": ["single-hop", "multi-hop", "temporal", "open-domain"],
        "synthetic": ["fact"],
    }
    steps = {"locomo": [0], "synthetic": [0, 1, 2, 3]}
    judgement_paths, rows = [], []
    for benchmark, kinds in types.items():
        for system in SYSTEMS:
            frames = []
            for step in steps[benchmark]:
                p = SKILL[system] * (1 - 0.1 * step) if system != "none" else 0.1
                for i in range(60):
                    qtype = kinds[i % len(kinds)]
                    correct = float(rng.random() < p)
                    f1 = round(float(np.clip(correct * 0.8 + rng.random() * 0.2, 0, 1)), 3)
                    for metric, value in (("accuracy", correct), ("f1", f1)):
                        row = _judgement(system, f"{benchmark}-q{i}", qtype, value, step, metric)
                        frames.append({**row, "benchmark": benchmark})
            judgements = pd.DataFrame(frames)
            path = folder / benchmark / system / "judgements.parquet"
            write_table(judgements, path, "judgements")
            judgement_paths.append(path)
            for (step, metric), group in judgements.groupby(["step", "metric"]):
                base = {"benchmark": benchmark, "system": system, "protocol": "static_qa"}
                base |= {"step": step, "metric": metric}
                per_type = group.groupby("question_type")["value"]
                rows.append({**base, "aggregate": "micro", "value": group["value"].mean(), "n": 60})
                rows.append(
                    {**base, "aggregate": "macro", "value": per_type.mean().mean(), "n": 60}
                )
                for qtype, values in per_type:
                    rows.append(
                        {
                            **base,
                            "aggregate": f"type:{qtype}",
                            "value": values.mean(),
                            "n": len(values),
                        }
                    )
    summary = folder / "summary.parquet"
    write_table(pd.DataFrame(rows), summary, "summary")

    diagnosis = []
    for system in SYSTEMS[1:]:
        for step in steps["synthetic"]:
            miss = 1 - SKILL[system]
            rates = {"write": 0.2 * miss, "read": 0.4 * miss, "utilization": 0.3 * miss}
            if system == "full_context":
                rates = {"write": 0.0, "read": 0.1 * miss, "utilization": 0.8 * miss}
            rates |= {"correct": 1 - miss, "undiagnosable": 0.1 * miss}
            for failure, rate in rates.items():
                diagnosis.append(("synthetic", system, step, "all", failure, rate, 60))
    diagnosis_path = folder / "diagnosis.parquet"
    write_table(_diagnosis(diagnosis), diagnosis_path, "diagnosis")

    ledgers = [
        _ledger_json(
            folder / "locomo/bm25_message/answer.ledger.json",
            "agent",
            "answer",
            "gpt-4o-mini",
            240,
            60,
            486_000,
            9_000,
        ),  # fmt: skip
        _ledger_json(
            folder / "locomo/bm25_message/judge.ledger.json",
            "judge",
            "judge_qa",
            "offline-heuristic",
            240,
            0,
            24_000,
            240,
        ),  # fmt: skip
    ]
    return summary, judgement_paths, ledgers, diagnosis_path


CONFIG = {
    "benchmarks": {"locomo": {"loader": "locomo", "source": {"path": "data/locomo10.json"}}},
    "systems": {"bm25_message": {"k": 10}},
    "models": {"agent": {"backend": "openai", "model": "gpt-4o-mini", "api_key_env": "OPENAI_KEY"}},
    "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.6}},
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    summary, judgements, ledgers, diagnosis = make_results(folder)
    out = build_report(
        summary, judgements, ledgers, CONFIG, folder / "report.html", diagnosis_path=diagnosis
    )
    return out


def _images(page):
    return [
        base64.b64decode(data).decode("utf-8")
        for data in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', page)
    ]


def test_report_holds_the_summary_table_with_intervals(report):
    page = report.read_text()
    assert "<h2>Headline scores</h2>" in page
    scores = pd.read_csv(report.parent / "report" / "scores.tsv", sep="\t")
    best = scores[(scores["benchmark"] == "locomo") & (scores["metric"] == "accuracy")].iloc[0]
    assert best["system"] == "bm25_message"  # sorted best first
    assert best["ci_method"] == "wilson" and best["ci_low"] < best["micro"] < best["ci_high"]
    assert f"[{best['ci_low']:.3f}, {best['ci_high']:.3f}]" in page
    f1 = scores[scores["metric"] == "f1"]
    assert set(f1["ci_method"]) == {"bootstrap"}


def test_report_embeds_one_captioned_figure_per_view(report):
    page = report.read_text()
    images = _images(page)
    # Bars for 2 metrics, type grids for locomo x 2 metrics (synthetic has a single question type,
    # so no grid), curves for 2 metrics, 1 diagnosis figure.
    captions = re.findall(r"<figcaption><b>Figure (\d+)\.</b>", page)
    assert len(images) == len(captions) == 7
    assert captions == [str(i) for i in range(1, 8)]
    assert all(image.lstrip().startswith("<?xml") and "<svg" in image for image in images)
    assert "Wilson score interval" in page and "percentile bootstrap" in page
    derived = report.parent / "report"
    assert (derived / "bars-accuracy.svg").read_text() == images[0]
    assert {"steps-accuracy.svg", "diagnosis.svg", "types-locomo-f1.svg"} <= {
        p.name for p in derived.iterdir()
    }
    assert not list(derived.glob("*.parquet"))


def test_report_shows_costs_config_and_versions(report):
    page = report.read_text()
    # 180 cache misses: 486,000 tokens in at $0.15/M + 9,000 out at $0.60/M = 0.0729 + 0.0054
    # USD; the offline judge has no price, so the total is unknown rather than understated.
    tasks = pd.read_csv(report.parent / "report" / "ledger_tasks.tsv", sep="\t")
    assert tasks.set_index("role").loc["agent", "cost_usd"] == pytest.approx(0.0783)
    assert "480 model calls (60 answered from the cache)" in page
    assert "unknown (no price for some models)" in page
    assert "api_key_env: OPENAI_KEY" in page and "gpt-4o-mini" in page
    for software in (
        "python",
        "snakemake",
        "pandas",
        "pyarrow",
        "openai",
        "mnemoflow",
        "git commit",
    ):
        assert f"<td>{software}</td>" in page
    assert "9.27.1" in page  # snakemake's pinned version


def test_report_is_reproducible(report, tmp_path):
    """Same results, same page and figures, byte for byte (paths are shown relative to the page)."""
    summary, judgements, ledgers, diagnosis = make_results(tmp_path)
    again = build_report(
        summary, judgements, ledgers, CONFIG, tmp_path / "report.html", diagnosis_path=diagnosis
    )
    assert again.read_text() == report.read_text()
    assert (tmp_path / "report" / "steps-f1.svg").read_bytes() == (
        report.parent / "report" / "steps-f1.svg"
    ).read_bytes()


def test_a_failed_build_leaves_no_report(tmp_path):
    summary, judgements, ledgers, _ = make_results(tmp_path)
    ledgers[0].write_text("{not json")
    with pytest.raises(ReportError, match="answer.ledger.json: cannot read ledger JSON"):
        build_report(summary, judgements, ledgers, CONFIG, tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "report").exists()


def test_a_report_without_judgements_ledgers_or_diagnosis_says_what_is_missing(tmp_path):
    summary, _, _, _ = make_results(tmp_path)
    out = build_report(summary, [], [], {}, tmp_path / "plain.html")
    page = out.read_text()
    assert "Wilson score interval of the score out of its n" in page
    assert "No ledgers were given." in page and "No diagnosis table was given" in page


@pytest.mark.slow
def test_screenshot_of_the_report_shows_a_rendered_page(report, tmp_path):
    reason = apt_install(["chromium"], lambda: [] if find_chromium() else ["chromium"])
    if reason:
        pytest.skip(reason)
    from PIL import Image

    png = screenshot(report, tmp_path / "report.png", width=1280, height=9000)
    with Image.open(png) as image:
        pixels = np.asarray(image.convert("L"))
    assert image.width == 1280 and 3000 < image.height < 9000  # a long page, trimmed
    # Figures and text: many distinct grey levels and a good share of non-white pixels.
    assert len(np.unique(pixels)) > 50
    assert (pixels < 200).mean() > 0.02


def _page(height, content_to):
    """A white image of ``height`` rows whose last dark row is ``content_to`` - 1."""
    from PIL import Image

    pixels = np.full((height, 100, 3), 255, dtype=np.uint8)
    pixels[:content_to:50, :] = 0  # text lines every 50 px, with 49 px gaps
    pixels[content_to - 1, :] = 0
    return Image.fromarray(pixels)


def test_a_capture_is_retried_taller_until_it_ends_in_blank_rows():
    assert next_height(_page(1000, 700)) is None  # 300 blank rows: the page ended
    assert next_height(_page(1000, 1000)) == 2000  # content to the last row: cut off
    assert next_height(_page(1000, 900)) == 2000  # 100 blank rows could be a gap inside


def test_screenshot_captures_a_page_taller_than_the_first_window(tmp_path):
    if not find_chromium():
        pytest.skip("no Chromium on PATH (apt-get install -y chromium)")
    from PIL import Image

    page = tmp_path / "tall.html"
    # 100 grey "lines" of 10 px every 25 px (like text), then a black footer at 2500-2540 px.
    lines = '<div style="height:10px;margin-bottom:15px;background:#888"></div>' * 100
    page.write_text(
        f'<html><body style="margin:0;background:#fff">{lines}'
        '<div style="height:40px;background:#000"></div></body></html>'
    )
    png = screenshot(page, tmp_path / "tall.png", width=400, height=800)
    with Image.open(png) as image:
        pixels = np.asarray(image.convert("L"))
    assert image.height == 2540 + 24  # the whole page, plus the trim margin
    assert (pixels[2500:2540] < 50).all() and (pixels[2540:] > 250).all()


def test_the_report_command_finds_tables_by_name(tmp_path, capsys):
    from mnemoflow.cli import main

    make_results(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("systems:\n  bm25_message: {k: 10}\n")
    assert main(["report", "--results", str(tmp_path), "--config", str(config)]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "judgements (8)" in page and "ledgers (2)" in page and "diagnosis (1)" in page
    assert "bm25_message:\n    k: 10" in page
    assert main(["report", "--results", str(tmp_path / "missing")]) == 2
    assert "missing/summary.parquet: no summary table" in capsys.readouterr().err


def test_writer_rates_per_run_count_unparsed_replies_and_dropped_events(tmp_path):
    """Two shards of one AWE run: 10 writer calls, 2 replies that never parsed and 3 events
    dropped -> parse failure rate 0.2 and 0.3 dropped events per call; a run without writer
    calls has no row."""
    for shard, (calls, unparsed, dropped) in enumerate(((6, 2, 1), (4, 0, 2))):
        folder = tmp_path / "results" / "amem" / "awe" / "interactive" / "step0" / f"shard{shard}"
        folder.mkdir(parents=True)
        ledger = Ledger()
        for _ in range(calls):
            ledger.record("memory_writer", "memory_update_facts", model="m", cache_hit=False,
                          tokens_in=10, tokens_out=5, latency_s=0.1)  # fmt: skip
        for _ in range(unparsed):
            ledger.record_parse_failure("memory_writer", "memory_update_facts")
        ledger.record_dropped_events("memory_writer", "memory_update_facts", dropped)
        ledger.record("agent", "interactive_act", model="m", cache_hit=False, tokens_in=10,
                      tokens_out=5, latency_s=0.1)  # fmt: skip
        (folder / "dialogues.ledger.json").write_text(ledger.to_json({}))
    plain = tmp_path / "results" / "amem" / "native" / "interactive" / "step0"
    plain.mkdir(parents=True)
    ledger = Ledger()
    ledger.record("agent", "interactive_act", model="m", cache_hit=False, tokens_in=10,
                  tokens_out=5, latency_s=0.1)  # fmt: skip
    (plain / "dialogues.ledger.json").write_text(ledger.to_json({}))
    ledgers = [load_ledger(p) for p in sorted(tmp_path.rglob("*.ledger.json"))]
    rates = writer_rates(ledgers).set_index("system")
    assert list(rates.index) == ["awe"]
    row = rates.loc["awe"]
    assert (row["writer_calls"], row["parse_failures"], row["dropped_events"]) == (10, 2, 3)
    assert row["parse_failure_rate"] == pytest.approx(0.2)
    assert row["dropped_per_call"] == pytest.approx(0.3)


def test_the_data_section_shows_questions_and_the_loader_s_rules(tmp_path):
    """summary.md and the report say how many questions the runs ask and what each loader rule
    dropped or kept (prepared/data_version.json ``records``, written by the prepare job)."""
    from mnemoflow.report.summary import versions_markdown

    versions = {
        "locomo": {
            "id": "79fa87e90f04",
            "source": {"file": "locomo10.json"},
            "records": {
                "questions": 1986,
                "questions_dropped": 0,
                "rules": ["2 evidence ids naming no turn: dropped (meta.raw_evidence keeps them)"],
            },
        }
    }
    text = "\n".join(versions_markdown(versions))
    assert "| locomo | `79fa87e90f04` | locomo10.json | 1986 (0 dropped) |" in text
    assert "- locomo: 2 evidence ids naming no turn: dropped" in text
    summary, _, _, _ = make_results(tmp_path)
    page = build_report(
        summary, [], [], {}, tmp_path / "data.html", data_versions=versions
    ).read_text()
    assert "1986 (0 dropped)" in page
    assert "locomo: 2 evidence ids naming no turn: dropped" in page
