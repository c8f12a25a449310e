"""The dossier behind every number (report/dossier.py): runs, files and hashes, models without
secrets, judge, cost, and each published cell with its run and the paper's own settings."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mnemoflow.codeversion import code_version
from mnemoflow.data.errata import file_sha256 as sha256
from mnemoflow.report.dossier import build_dossier, code_identity, host
from mnemoflow.report.summaries import LedgerFile, run_costs

SECRET_URL = "https://alice:s3cret@api.example.com:8443/v1?api_key=abc"


def _summary_row(system: str, metric: str, value: float, step: int = 1) -> dict:
    return {"benchmark": "bench", "system": system, "protocol": "qa", "step": step,
            "metric": metric, "aggregate": "micro", "value": value, "n": 10}  # fmt: skip


def _ledger(tmp_path, system: str, stage: str, extra: dict | None = None) -> LedgerFile:
    data = {
        "models": {"judge": "gpt-x"},
        "roles": {
            "judge": {
                "role": "judge",
                "backend": "openai",
                "model": "gpt-x",
                "base_url": SECRET_URL,
                "temperature": 0.0,
                "max_tokens": 16,
                "top_p": None,
                "seed": 7,
                "endpoint": None,
            },  # fmt: skip
        },
        "totals": {},
        "by_role_task": {"judge/judge_qa": {"calls": 3, "tokens_in": 30, "tokens_out": 3}},
        **(extra or {}),
    }
    path = tmp_path / "results" / "bench" / system / "qa" / "step1" / "shard0" / f"{stage}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return LedgerFile(str(path), data, str(path))


def test_a_dossier_traces_runs_files_models_judge_and_published_cells(tmp_path):
    summary = pd.DataFrame(
        [_summary_row("bm25", "accuracy", 0.6), _summary_row("none", "accuracy", 0.2),
         _summary_row("bm25", "parse_failures", 0.0), _summary_row("bm25", "accuracy", 0.5, 0)]
    )  # fmt: skip
    judge = {"benchmark": "generic", "prompt_version": "qa-v1", "temperature": 0.0}
    ledgers = [_ledger(tmp_path, "bm25", "judgements.ledger", {"judge": judge})]
    answers = ledgers[0].path.replace("judgements.ledger.json", "answers.parquet")
    pd.DataFrame({"question_id": ["q1"]}).to_parquet(answers)
    version = tmp_path / "results" / "bench" / "prepared" / "data_version.json"
    version.parent.mkdir(parents=True)
    version.write_text(json.dumps({"id": "abc123", "loader": "mine", "source": None}))
    cells = pd.DataFrame(
        [{"paper": "p", "table": "t", "row": "BM25 (paper)", "protocol": "qa", "period": "mean",
          "metric": "accuracy", "system": "bm25", "published": 0.7, "ours": 0.6},
         {"paper": "p", "table": "t", "row": "Other", "protocol": "qa", "period": "mean",
          "metric": "accuracy", "system": "", "published": 0.9, "ours": float("nan")}]
    )  # fmt: skip
    published = cells[["paper", "table", "row", "protocol", "period", "metric"]].assign(
        version="v1", model=["gpt-4o", ""], source="Table 2", note=["top-k 10", ""]
    )
    dossier = build_dossier(
        summary,
        ledgers=ledgers,
        costs=run_costs(ledgers, summary, {"gpt-x": {"input": 1.0, "output": 2.0}}),
        files={"answers": [answers]},
        versions=[str(version)],
        environments={"bench": str(version)},  # any file stands in for an environment
        judge_prompts={"generic": {"prompt_fingerprint": "f" * 16}},
        cells=cells,
        published=published,
        code={"describe": "v0-1-gabc"},
    )
    assert set(dossier["runs"]) == {"bench/bm25/qa", "bench/none/qa"}
    run = dossier["runs"]["bench/bm25/qa"]
    assert run["steps"] == [0, 1]
    assert run["data"]["version"] == "abc123"
    assert run["data"]["data_version"]["sha256"] == sha256(version)
    assert run["data"]["environment"] == run["data"]["data_version"]
    assert run["files"]["answers"] == [{"path": answers, "sha256": sha256(answers)}]
    assert run["files"]["ledgers"][0]["path"] == ledgers[0].path
    binding = run["models"]["judge"]["bindings"][0]
    assert binding["address"] == "api.example.com:8443" and binding["seed"] == 7
    assert run["models"]["judge"]["calls"] == 3
    assert run["judge"]["provenance"] == [{**judge, "prompt_fingerprint": "f" * 16}]
    assert run["cost"]["calls"] == 3 and run["cost"]["usd"] == pytest.approx(36e-6)
    assert dossier["runs"]["bench/none/qa"]["files"] == {"ledgers": []}
    text = json.dumps(dossier)
    assert "s3cret" not in text and "alice" not in text and "api_key" not in text
    # headline numbers: the last step's scores, no counters
    assert [(h["run"], h["value"]) for h in dossier["headline"]] == [
        ("bench/bm25/qa", 0.6),
        ("bench/none/qa", 0.2),
    ]
    paired, unpaired = dossier["published"]
    assert paired["run"] == "bench/bm25/qa" and paired["published"] == 0.7
    assert paired["paper_settings"] == {"version": "v1", "model": "gpt-4o", "source": "Table 2",
                                        "note": "top-k 10"}  # fmt: skip
    assert unpaired["run"] is None and unpaired["ours"] is None


def test_the_workflow_writes_addresses_redacted(tmp_path):
    from mnemoflow.llm.addresses import redact

    ledger = _ledger(tmp_path, "bm25", "answers.ledger")
    ledger.data["roles"]["judge"]["base_url"] = "https://h.example/tok_abc/v1"
    summary = pd.DataFrame([_summary_row("bm25", "accuracy", 1.0)])
    dossier = build_dossier(
        summary, ledgers=[ledger], costs=pd.DataFrame(), files={}, address=redact
    )
    [binding] = dossier["runs"]["bench/bm25/qa"]["models"]["judge"]["bindings"]
    assert binding["address"].startswith("https://h.example:443/redacted-")
    assert "tok_abc" not in json.dumps(dossier)


def test_host_keeps_only_host_and_port():
    assert host(SECRET_URL) == "api.example.com:8443"
    assert host("http://localhost/v1") == "localhost"
    assert host(None) == ""


def test_outside_a_checkout_the_code_is_named_by_its_fingerprints(tmp_path):
    code = code_identity(tmp_path, entries=["mnemoflow.lexical"])
    assert code["describe"] is None and code["commit"] is None
    assert code["fingerprints"] == {"mnemoflow.lexical": code_version("mnemoflow.lexical")}
    assert code["mnemoflow"]


@pytest.mark.slow
def test_the_tiny_run_writes_a_dossier_the_report_links(tiny_run):
    dossier = json.loads((tiny_run / "results" / "report" / "dossier.json").read_text())
    summary = pd.read_parquet(tiny_run / "results" / "summary.parquet")
    runs = {f"{b}/{s}/{p}" for b, s, p in summary[["benchmark", "system", "protocol"]].values}
    assert set(dossier["runs"]) == runs
    listed = []
    for run in dossier["runs"].values():
        assert run["files"]["answers"] and run["files"]["judgements"] and run["files"]["ledgers"]
        assert run["data"]["data_version"] and run["data"]["prepared"]
        assert run["models"]["judge"]["bindings"][0]["backend"] == "offline"
        assert run["judge"]["names"] and run["judge"]["provenance"][0]["prompt_fingerprint"]
        assert run["cost"]["calls"] > 0
        listed += [e for entries in run["files"].values() for e in entries]
        listed += [run["data"]["data_version"], *run["data"]["prepared"]]
    for entry in listed:
        assert sha256(tiny_run / entry["path"]) == entry["sha256"], entry["path"]
    assert dossier["code"]["mnemoflow"] and dossier["headline"]
    assert {h["run"] for h in dossier["headline"]} == runs
    assert 'href="report/dossier.json"' in (tiny_run / "results" / "report.html").read_text()
    assert "(report/dossier.json)" in (tiny_run / "results" / "summary.md").read_text()


def test_each_judge_names_its_prompt_version_and_fingerprint():
    from mnemoflow.eval.static_qa.judge_prompts import prompt_fingerprints
    from mnemoflow.eval.static_qa.judges import LOCOMO_J_VERSION

    prompts = prompt_fingerprints()
    assert {"longmemeval", "locomo", "generic"} <= set(prompts)
    assert prompts["locomo"]["prompt_version"] == LOCOMO_J_VERSION
    assert prompts["locomo"]["prompt_fingerprint"] == code_version(
        "mnemoflow.eval.static_qa.judges:locomo_request"
    )
