"""``mnemoflow reparse``: a run's stored judge replies re-read by the current parser, no model."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd

from mnemoflow.cli import main
from mnemoflow.data.tables import read_table, write_table
from mnemoflow.eval.static_qa.reparse import asks_of, reparse
from mnemoflow.testing.openai_server import GARBLED_TEXT


def test_stored_replies_are_decoded_per_ask():
    assert asks_of("yes", repeated=False) == [["yes"]]
    assert asks_of('{"label": "WRONG"}', repeated=False) == [['{"label": "WRONG"}']]
    assert asks_of(json.dumps([GARBLED_TEXT, "no"]), repeated=False) == [[GARBLED_TEXT, "no"]]
    assert asks_of(json.dumps(["yes", "no"]), repeated=True) == [["yes"], ["no"]]
    assert asks_of(json.dumps(["yes", ["?", "no"]]), repeated=True) == [["yes"], ["?", "no"]]


def _row(qid, metric, value, raw, ok=True, judge="offline/lme-v1"):
    return {"benchmark": "longmemeval", "system": "s", "protocol": "static", "step": 0,
            "question_id": qid, "question_type": "multi-session", "judge": judge,
            "metric": metric, "value": value, "raw_reply": raw, "parse_ok": ok}  # fmt: skip


def test_repeats_are_re_read_per_ask_with_their_agreement_and_the_reference():
    frame = pd.DataFrame(
        [
            _row("q1", "accuracy", 1.0, json.dumps(["No doubt, yes.", "Yes or no: no."])),
            _row("q1", "judge_agreement", 1.0, "[1, 2]"),
            _row("q2", "f1", 0.5, "", judge="locomo-f1/official"),  # no judge kind: kept
        ]
    )
    out, changes = reparse(frame)
    by = out.set_index(["question_id", "metric"])
    assert by.loc[("q1", "accuracy"), "value"] == 0.5
    assert by.loc[("q1", "accuracy"), "value_reference"] == 1.0  # "yes" in both replies
    assert by.loc[("q1", "judge_agreement"), "value"] == 0.0
    assert by.loc[("q2", "f1"), "value"] == 0.5 and math.isnan(
        by.loc[("q2", "f1"), "value_reference"]
    )
    assert [(c.row["metric"], c.old, c.new) for c in changes] == [
        ("accuracy", 1.0, 0.5),
        ("judge_agreement", 1.0, 0.0),
    ]


def test_reparse_lists_every_changed_verdict_of_a_doctored_run(tiny_run, tmp_path, capsys):
    results = shutil.copytree(tiny_run / "results", tmp_path / "results")
    files = sorted(results.rglob("judgements.parquet"))
    assert files
    # untouched, the run's verdicts read the same with the current parser
    assert main(["reparse", str(results)]) == 0
    clean = capsys.readouterr().out
    assert clean.strip().endswith("judgements change with the current parser")
    assert clean.splitlines()[-1].startswith("0 of ") and "\n  " not in clean
    # doctored: replies a first-word parser misread, as an old run would have stored them
    path = files[0]
    table = read_table(path, "judgements")
    table = table.drop(columns="value_reference")  # as written before the column existed
    first, second, third = table.index[:3]
    table.loc[first, ["raw_reply", "value"]] = ["No doubt about it, yes: it matches.", 0.0]
    reasked = json.dumps([GARBLED_TEXT, "Yes or no: no. It names the old city."])
    table.loc[second, ["raw_reply", "value"]] = [reasked, 1.0]
    table.loc[third, ["raw_reply", "value"]] = ["Yes and no.", 1.0]
    table.to_parquet(path)
    out = tmp_path / "reparsed"
    assert main(["reparse", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    listed = [line for line in printed.splitlines() if line.startswith("  ")]
    qids = table.loc[[first, second, third], "question_id"].tolist()
    assert len(listed) == 3
    assert qids[0] in listed[0] and listed[0].endswith(": 0 -> 1")
    assert qids[1] in listed[1] and listed[1].endswith(": 1 -> 0")
    assert qids[2] in listed[2] and listed[2].endswith(": 1 -> unscored")
    assert printed.strip().endswith(f"3 of {sum(len(read_table(f, 'judgements')) for f in files)} "
                                    f"judgements change with the current parser; re-read tables "
                                    f"in {out}")  # fmt: skip
    rewritten = read_table(out / path.relative_to(results), "judgements")
    assert rewritten.loc[[first, second, third], "value"].fillna(-1).tolist() == [1.0, 0.0, -1]
    assert rewritten.loc[third, "parse_ok"] == False  # noqa: E712  (numpy bool)
    assert rewritten["raw_reply"].tolist() == table["raw_reply"].tolist()  # verbatim
    assert len(list(out.rglob("judgements.parquet"))) == len(files)
    # the run itself is not modified
    assert read_table(path, "judgements")["value"].tolist() == table["value"].tolist()


def test_reparse_of_a_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["reparse", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_written_tables_keep_the_schema(tmp_path):
    frame, _ = reparse(pd.DataFrame([_row("q1", "accuracy", 1.0, "yes")]))
    back = read_table(write_table(frame, tmp_path / "j.parquet", "judgements"), "judgements")
    assert back["value"].tolist() == [1.0] and back["value_reference"].tolist() == [1.0]
