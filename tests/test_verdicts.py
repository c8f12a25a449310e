"""Judge replies read as a person reads them (mnemoflow.eval.metrics.verdicts).

The corpus under tests/data/verdicts/ holds verbose judge replies (hedges, negation, contrast,
markdown, JSON, trailing explanations, thinking blocks) with the label a person reads in each, or
"unparsed" where a person reads no single verdict (none, or both). Every one must be read so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.data.tables import read_table, write_table
from mnemoflow.eval.metrics import verdicts
from mnemoflow.eval.static_qa.judges import (
    LONGMEMEVAL_JUDGE,
    longmemeval_reference,
    parse_correct_wrong,
    parse_yes_no,
    reference_value,
    verdict_parser,
)
from mnemoflow.eval.static_qa.scoring import REFERENCE_DISAGREEMENTS, reference_rows
from mnemoflow.llm.types import Reply, UnparseableReply

CORPUS = Path(__file__).parent / "data" / "verdicts"
MIN_PER_SCHEME = 150


def corpus(name: str) -> list[dict]:
    with open(CORPUS / f"{name}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read(reader, *args):
    try:
        return reader(*args)
    except UnparseableReply:
        return "unparsed"


def labelled(value, positive: str, negative: str):
    return value if value == "unparsed" else (positive if value == 1.0 else negative)


SCHEMES = {
    "yes_no": lambda row: labelled(read(verdicts.yes_no, row["reply"]), "yes", "no"),
    "correct_wrong": lambda row: labelled(
        read(verdicts.correct_wrong, row["reply"]), "CORRECT", "WRONG"
    ),
    "scores": lambda row: read(verdicts.score, row["reply"], row["low"], row["high"]),
    "json_labels": lambda row: labelled(
        read(
            verdicts.json_label,
            row["reply"],
            row["key"],
            {"CORRECT": 1.0, "WRONG": 0.0},
            verdicts.CORRECT_WRONG,
        ),
        "CORRECT",
        "WRONG",
    ),
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_corpus_reply_is_read_as_a_person_reads_it(scheme):
    rows = corpus(scheme)
    assert len(rows) >= MIN_PER_SCHEME
    labels = {str(row["expected"]) for row in rows}
    assert "unparsed" in labels and len(labels) >= 3  # both verdicts and the unparsed case
    misread = [
        (n, row["expected"], got, row["reply"][:80])
        for n, row in enumerate(rows, 1)
        if (got := SCHEMES[scheme](row)) != row["expected"]
    ]
    assert misread == []


def test_the_replies_the_first_word_parser_misread():
    assert verdicts.yes_no("No doubt about it, yes: the response matches.") == 1.0
    assert verdicts.yes_no("Yes or no: no. The response names the old city.") == 0.0
    assert verdicts.correct_wrong("The year is 2018, so it is not correct.") == 0.0
    assert verdicts.correct_wrong("The answer isn't correct, since it names Porto.") == 0.0
    assert verdicts.correct_wrong("There is nothing wrong with the answer.") == 1.0


def test_labelled_forms_outrank_the_explanation():
    reply = "The city is wrong at first sight, and the date looks off.\n\n**Final answer:** CORRECT"
    assert verdicts.correct_wrong(reply) == 1.0
    assert (
        verdicts.yes_no("Answer: no\n\nYes, the response mentions Lisbon, but as the old city.")
        == 0.0
    )
    assert verdicts.score("Score: 4\n\nIt covers 3 of the 5 points well.", 1, 5) == 4


def test_a_thinking_block_is_never_read():
    assert verdicts.yes_no("<think>\nThe answer is yes.\n</think>\n\nNo.") == 0.0
    with pytest.raises(UnparseableReply):
        verdicts.correct_wrong("<think>\nCORRECT, it seems.")  # thinking never closed


@pytest.mark.parametrize(
    ("reader", "reply", "asked"),
    [
        (verdicts.yes_no, "Yes and no.", "the single word yes or no"),
        (verdicts.yes_no, "The response is correct.", "the single word yes or no"),
        (
            verdicts.correct_wrong,
            "The city is correct but the date is wrong.",
            "the single word CORRECT or WRONG",
        ),
        (lambda t: verdicts.score(t, 1, 5), "3 or 4", "one integer 1-5"),
    ],
)
def test_a_reply_with_both_verdicts_or_none_is_re_asked_for_the_label_alone(reader, reply, asked):
    with pytest.raises(UnparseableReply, match=f"reply with only {asked}"):
        reader(reply)


def test_the_judges_verdict_functions_keep_their_signature_and_re_ask_with_the_label():
    assert parse_yes_no("No doubt, yes.") == 1.0 and parse_yes_no("maybe") is None
    assert parse_correct_wrong("not correct") == 0.0 and parse_correct_wrong("") is None
    with pytest.raises(UnparseableReply, match="yes or no"):
        verdict_parser(parse_yes_no)("Partially.")


def test_longmemeval_reference_reading_is_a_substring_test_kept_beside_the_verdict():
    reply = "No. The response says yesterday, not the 14th."
    assert longmemeval_reference(reply) == 1.0 and parse_yes_no(reply) == 0.0
    replies = [Reply(reply, "m", 0, 0, 0.0, False, raw_replies=[reply])]
    assert reference_value(LONGMEMEVAL_JUDGE, replies) == 1.0


def _judgements(values, references):
    n = len(values)
    return pd.DataFrame(
        {
            "benchmark": ["longmemeval"] * n,
            "system": ["s"] * n,
            "protocol": ["static"] * n,
            "step": [0] * n,
            "question_id": [f"q{i}" for i in range(n)],
            "question_type": ["multi-session"] * n,
            "judge": ["j"] * n,
            "metric": ["accuracy"] * n,
            "value": values,
            "raw_reply": [""] * n,
            "parse_ok": [not math.isnan(v) for v in values],
            "value_reference": references,
        }
    )


def test_disagreements_with_the_reference_are_counted_per_run():
    nan = float("nan")
    frame = _judgements([1.0, 0.0, nan, 1.0], [1.0, 1.0, 0.0, nan])
    (row,) = reference_rows(frame).to_dict("records")
    assert (row["metric"], row["aggregate"], row["value"], row["n"]) == (
        REFERENCE_DISAGREEMENTS,
        "count",
        2.0,  # q1 read no where the substring test reads yes; q2 unscored where it reads no
        3,
    )
    assert reference_rows(_judgements([1.0], [nan])).empty


def test_judgements_written_before_value_reference_are_read_with_it_null(tmp_path):
    frame = _judgements([1.0, 0.0], [1.0, 0.0])
    path = write_table(frame, tmp_path / "new.parquet", "judgements")
    assert read_table(path, "judgements")["value_reference"].tolist() == [1.0, 0.0]
    old = frame.drop(columns="value_reference")
    old.to_parquet(tmp_path / "old.parquet")
    back = read_table(tmp_path / "old.parquet", "judgements")
    assert list(back.columns) == list(frame.columns) and back["value_reference"].isna().all()


def test_a_json_rating_is_found_among_prose_and_must_agree():
    from mnemoflow.eval.memorybench.judged_score import json_rating

    assert json_rating('The idea overlaps a lot.\n```json\n{"rating": 7}\n```', 10) == 7
    assert json_rating('<think>{"rating": 2}</think>Here: {"rating": 8, "why": "x"}', 10) == 8
    for text in ('{"rating": 7} or maybe {"rating": 8}', "Rating: 7", '{"rating": 11}'):
        with pytest.raises(UnparseableReply):
            json_rating(text, 10)


def test_the_reference_reading_skips_the_thinking_as_the_verdict_does():
    assert longmemeval_reference("<think>yes? maybe</think>\nNo.") == 0.0
    assert longmemeval_reference("Nope, the eyes colour differs.") == 1.0  # its substring rule


def test_a_judgements_frame_without_value_reference_is_written_with_it_null(tmp_path):
    frame = _judgements([1.0], [1.0]).drop(columns="value_reference")
    back = read_table(write_table(frame, tmp_path / "j.parquet", "judgements"), "judgements")
    assert back["value_reference"].isna().all() and back["value"].tolist() == [1.0]
