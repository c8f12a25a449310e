"""Errata overlays: parsing, one-line errors, and the shipped LoCoMo audit on the real file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow.data.errata import (
    ERRATA_DIR,
    apply_overlay,
    data_version,
    errata_of,
    load_overlay,
    overlay_path,
)
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.validate import DataError
from tests.shared_data import SHARED_DATA, needs_shared_data

LOCOMO = SHARED_DATA / "locomo" / "locomo10.json" if SHARED_DATA else None

HEAD = {"name": "tiny", "benchmark": "locomo", "source": {"url": "https://example.org/audit"}}
QUESTIONS = pd.DataFrame(
    {
        "question_id": ["c_q0", "c_q1"],
        "episode_id": ["c", "c"],
        "question": ["When did A run?", "What did B paint?"],
        "answer": ["Sunday", "a lake"],
        "meta": ['{"category": 2}', '{"category": 4}'],
    }
)
SESSIONS = pd.DataFrame({"episode_id": ["c", "c"], "turn_id": ["D1:1", "D1:2"]})


def write(tmp_path: Path, entries, **head) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**HEAD, **head, "entries": entries}), encoding="utf-8")
    return path


def entry(**fields):
    return {
        "question_id": "c_q0",
        "question": "When did A run?",
        "action": "correct",
        "answer": "Saturday",
        "reason": "temporal_error",
        **fields,
    }


def test_apply_records_each_erratum_in_meta_and_keeps_the_released_gold(tmp_path):
    overlay = load_overlay(
        write(
            tmp_path,
            [
                entry(evidence=["D1:2"]),
                {
                    "question_id": "c_q1",
                    "question": "What did B paint?",
                    "action": "drop",
                    "reason": "ambiguous",
                },
            ],
        )
    )
    assert overlay.counts() == {"correct": 1, "drop": 1, "evidence": 0}
    out = apply_overlay(QUESTIONS, SESSIONS, overlay)
    assert list(out["answer"]) == ["Sunday", "a lake"]  # the released gold stays
    first = json.loads(out["meta"].iat[0])
    assert first["category"] == 2
    assert first["errata"] == {
        "overlay": "tiny",
        "action": "correct",
        "reason": "temporal_error",
        "answer": "Saturday",
        "evidence": ["D1:2"],
    }
    assert errata_of(out["meta"].iat[1])["action"] == "drop"


@pytest.mark.parametrize(
    "entries, message",
    [
        (
            [entry(action="fix")],
            "tiny.yaml: entry 0 (c_q0): 'action' must be one of correct, drop, evidence, got 'fix'",
        ),
        ([entry(answer="")], "tiny.yaml: entry 0 (c_q0): 'answer' must be a non-empty string"),
        ([entry(action="drop")], "tiny.yaml: entry 0 (c_q0): 'answer' is only for action correct"),
        ([entry(colour="red")], "tiny.yaml: entry 0 (c_q0): unknown field 'colour'"),
        ([entry(), entry()], "tiny.yaml: entry 1 (c_q0): 'question_id' already given by entry 0"),
        (
            [{**entry(action="evidence"), "answer": None}],
            "tiny.yaml: entry 0 (c_q0): 'evidence' is required",
        ),
        ([], "tiny.yaml: 'entries' must be a non-empty list"),
    ],
)
def test_malformed_overlays_fail_with_one_line(tmp_path, entries, message):
    with pytest.raises(DataError) as err:
        load_overlay(write(tmp_path, entries))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"question": "When did A walk?"},
            "tiny.yaml: entry 0 (c_q0): 'question' is 'When did A walk?' but the data has "
            "'When did A run?'",
        ),
        ({"question_id": "c_q9"}, "tiny.yaml: entry 0 (c_q9): 'question_id' names no question"),
        ({"evidence": ["D7:1"]}, "tiny.yaml: entry 0 (c_q0): 'evidence' 'D7:1' is no turn of c"),
    ],
)
def test_entries_that_do_not_match_the_data_fail(tmp_path, fields, message):
    overlay = load_overlay(write(tmp_path, [entry(**fields)]))
    with pytest.raises(DataError) as err:
        apply_overlay(QUESTIONS, SESSIONS, overlay)
    assert str(err.value).startswith(message)


def test_data_version_names_the_file_and_the_overlay(tmp_path):
    source = tmp_path / "data.json"
    source.write_text("[]", encoding="utf-8")  # sha256 4f53cda18c2b…
    overlay = load_overlay(write(tmp_path, [entry()]))
    version = data_version(source, overlay)
    assert version["source"]["sha256"].startswith("4f53cda18c2b")
    assert version["id"] == f"4f53cda18c2b+tiny@{overlay.sha256[:12]}"
    assert version["errata"]["counts"] == {"correct": 1, "drop": 0, "evidence": 0}
    assert data_version(None, None, {"revision": "abc", "sha256": "f" * 64})["id"] == "f" * 12


def test_a_shipped_overlay_is_found_by_name_and_a_missing_one_says_so():
    assert overlay_path("locomo-audit") == ERRATA_DIR / "locomo-audit.yaml"
    with pytest.raises(DataError, match="errata: nope: no such file, nor a shipped overlay"):
        overlay_path("nope")


@needs_shared_data
def test_the_locomo_audit_applies_to_the_real_file():
    """All 156 findings of dial481/locomo-audit (errors.json @ 9493fb4) match locomo10.json."""
    prepared = load_benchmark(
        {"loader": "locomo", "source": {"path": str(LOCOMO)}, "errata": "locomo-audit"}
    )
    overlay = prepared.errata
    assert overlay.counts() == {"correct": 48, "drop": 51, "evidence": 57}
    assert overlay.source["commit"] == "9493fb4b4af4256ed17a18e8fd0b3cfdeec29539"
    errata = prepared.questions.set_index("question_id")["meta"].map(errata_of).dropna()
    assert len(errata) == 156
    # the audit's 99 score-corrupting findings are the corrections and drops, all in categories 1-4
    changed = errata[errata.map(lambda e: e["action"] != "evidence")]
    assert len(changed) == 99
    types = prepared.questions.set_index("question_id").loc[changed.index, "question_type"]
    assert "adversarial" not in set(types)
    # the first error ever reported (snap-research/locomo#27): conv-26's charity race was a Saturday
    q5 = prepared.questions.set_index("question_id").loc["conv-26_q5"]
    assert q5["answer"] == "The sunday before 25 May 2023"
    assert errata["conv-26_q5"]["answer"].startswith("The Saturday before 25 May 2023")
    assert prepared.notes[-1].startswith("errata locomo-audit: 48 correct, 51 drop, 57 evidence")
