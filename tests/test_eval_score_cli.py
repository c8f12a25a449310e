"""``mnemoflow score`` on fixture tables: outputs, numbers computed by hand, bad input."""

from __future__ import annotations

import json
import math

import pytest

from mnemoflow import cli
from mnemoflow.data import registry
from mnemoflow.data.tables import read_table
from mnemoflow.registry import Entry
from tests.eval_fixtures import locomo_tables, longmemeval_tables
from tests.jsonl import write_jsonl


@pytest.fixture
def fixture_loaders(monkeypatch):
    """Stand-ins for the LongMemEval / LoCoMo loaders, returning the fixture tables."""
    registry.loaders()  # the built-ins first, so that they do not replace the stand-ins
    sessions, episodes, questions = longmemeval_tables()
    lme = registry.Prepared(sessions, questions, episodes)
    loc = registry.Prepared(*locomo_tables())
    monkeypatch.setitem(registry.LOADERS.entries, "longmemeval", Entry(lambda spec: lme, {}))
    monkeypatch.setitem(registry.LOADERS.entries, "locomo", Entry(lambda spec: loc, {}))
    return lme, loc


def score(benchmark, predictions, out, *options) -> int:
    """``mnemoflow score --benchmark BENCHMARK`` of a predictions file; the exit code.

    ``--data`` is read by no one: ``fixture_loaders`` stands in for the loaders.
    """
    argv = ["score", "--benchmark", benchmark, "--data", "unused.json"]
    argv += ["--predictions", predictions, "--out", out, *options]
    return cli.main([str(arg) for arg in argv])


PREDICTIONS = [
    {"question_id": "q_move", "hypothesis": "You moved to Lisbon."},
    {"question_id": "q_cat", "hypothesis": "Your cat is called Tom."},
    {"question_id": "q_car_abs", "hypothesis": "I don't know."},
]
RETRIEVALS = [
    {
        "question_id": "q_move",
        "retrieval_results": {
            "ranked_items": [{"corpus_id": "s_a_1"}, {"corpus_id": "answer_s_b_1"}]
        },
    },
    {
        "question_id": "q_cat",
        "retrieval_results": {
            "ranked_items": [{"corpus_id": "noans_s_b_1"}, {"corpus_id": "s_a_1"}]
        },
    },
]


def test_score_longmemeval_tables_and_hand_computed_scores(tmp_path, fixture_loaders, capsys):
    predictions = write_jsonl(tmp_path / "hyp.jsonl", PREDICTIONS)
    retrievals = write_jsonl(tmp_path / "ret.jsonl", RETRIEVALS)
    out = tmp_path / "out"
    code = score("longmemeval", predictions, out, "--retrievals", retrievals)
    assert code == 0
    printed = capsys.readouterr().out
    assert "scored 3 of 4 questions" in printed and "accuracy" in printed
    per_question = read_table(out / "question_scores.parquet")
    answer = per_question[per_question["level"] == "answer"].set_index("question_id")["value"]
    assert answer.to_dict() == {"q_move": 1.0, "q_cat": 0.0, "q_car_abs": 1.0}
    turn = per_question[(per_question["level"] == "turn")].set_index(["question_id", "metric"])
    assert turn.loc[("q_move", "recall_any@1"), "value"] == 0.0
    assert turn.loc[("q_move", "ndcg_any@5"), "value"] == 1.0  # gold at rank 2
    scores = read_table(out / "scores.parquet", "scores")
    micro = scores[(scores["metric"] == "accuracy") & (scores["aggregate"] == "micro")]
    assert micro["value"].item() == pytest.approx(2 / 3)
    judge = json.loads((out / "judge.json").read_text())
    assert judge["judge"] == "offline-heuristic/lme-v1" and judge["temperature"] == 0.0
    assert (out / "judgements.parquet").exists() and (out / "ledger.json").exists()

    # every accuracy aggregate, by hand from the three verdicts (1, 0, 1):
    # q_move and q_car_abs are single-session-user, q_cat multi-session; q_car_abs abstains
    got = {(r["metric"], r["aggregate"]): (r["value"], r["n"]) for r in scores.to_dict("records")}
    z = 1.959963984540054  # Wilson 95 % interval of 2 successes in 3, written out
    centre = (2 / 3 + z * z / 6) / (1 + z * z / 3)
    half = z * math.sqrt(2 / 3 * 1 / 3 / 3 + z * z / 36) / (1 + z * z / 3)
    expected = {
        ("accuracy", "micro"): (2 / 3, 3),
        ("accuracy", "macro"): ((1.0 + 0.0) / 2, 3),
        ("accuracy", "type:single-session-user"): (1.0, 2),
        ("accuracy", "type:multi-session"): (0.0, 1),
        ("accuracy", "abstention"): (1.0, 1),
        ("accuracy", "ci95_low"): (centre - half, 3),
        ("accuracy", "ci95_high"): (centre + half, 3),
        ("judge_parse_failures", "count"): (0.0, 3),
    }
    for key, (value, n) in expected.items():
        assert got[key] == (pytest.approx(value), n), key
    assert centre - half == pytest.approx(0.2077, abs=1e-4)  # the published Wilson table value
    # retrieval aggregates: only the two questions with a retrieval log are counted
    assert got[("session_recall_any@1", "micro")] == (0.0, 2)
    assert got[("turn_recall_any@3", "micro")] == (1.0, 2)


def test_score_locomo_reports_f1_j_and_evidence_recall(tmp_path, fixture_loaders, capsys):
    predictions = write_jsonl(
        tmp_path / "hyp.jsonl",
        [
            {"question_id": "conv-1_q0", "hypothesis": "adoption agencies"},
            {"question_id": "conv-1_q3", "hypothesis": "a lake"},
            {"question_id": "conv-1_q4", "hypothesis": "Not mentioned in the conversation"},
        ],
    )
    retrievals = write_jsonl(
        tmp_path / "ret.jsonl",
        [
            {
                "question_id": "conv-1_q0",
                "retrieval_results": {"ranked_items": [{"corpus_id": "D1:3"}]},
            }
        ],
    )
    out = tmp_path / "out"
    assert score("locomo", predictions, out, "--retrievals", retrievals) == 0
    scores = read_table(out / "scores.parquet", "scores").set_index(["metric", "aggregate"])
    assert scores.loc[("f1", "micro"), "value"] == pytest.approx(2 / 3)
    assert scores.loc[("f1", "type:adversarial"), "value"] == 1.0
    assert scores.loc[("j", "micro"), "value"] == pytest.approx(0.5)
    assert scores.loc[("j", "micro"), "n"] == 2  # category 5 is not judged
    assert scores.loc[("turn_evidence_recall", "micro"), "value"] == 1.0
    assert "f1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question_id": "q_move"}'], "line 1: missing field 'hypothesis'"),
        (['{"question_id": "q_move", "hypothesis": "x"}', "{oops"], "line 2: not valid JSON"),
        (['{"question_id": "nope", "hypothesis": "x"}'], "'nope' is not in the benchmark data"),
        (
            ['{"question_id": "q_move", "hypothesis": "x"}'] * 2,
            "line 2: question_id 'q_move' repeats line 1",
        ),
    ],
)
def test_bad_predictions_fail_with_one_line_and_write_nothing(
    tmp_path, fixture_loaders, capsys, lines, message
):
    predictions = tmp_path / "hyp.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert score("longmemeval", predictions, out) == 2
    error = capsys.readouterr().err
    assert message in error and str(predictions) in error
    assert len(error.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_retrieval_log_names_the_field(tmp_path, fixture_loaders, capsys):
    predictions = write_jsonl(tmp_path / "hyp.jsonl", PREDICTIONS[:1])
    retrievals = write_jsonl(tmp_path / "ret.jsonl", [{"question_id": "q_move"}])
    assert score("longmemeval", predictions, tmp_path / "o", "--retrievals", retrievals) == 2
    assert (
        "line 1 (q_move): missing field 'retrieval_results.ranked_items'" in capsys.readouterr().err
    )


def test_config_sets_judge_repeats_and_bad_models_fail(tmp_path, fixture_loaders, capsys):
    predictions = write_jsonl(tmp_path / "hyp.jsonl", PREDICTIONS)
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  judge:\n    backend: offline\njudge:\n  repeats: 2\n")
    out = tmp_path / "out"
    assert score("longmemeval", predictions, out, "--config", config) == 0
    scores = read_table(out / "scores.parquet", "scores").set_index(["metric", "aggregate"])
    # the offline judge is deterministic: two seeds, same verdicts
    assert scores.loc[("judge_agreement", "micro"), "value"] == 1.0
    assert scores.loc[("judge_agreement", "ci95_low"), "value"] == pytest.approx(0.4385, abs=1e-4)
    assert json.loads((out / "judge.json").read_text())["seeds"] == [0, 1]
    config.write_text("models:\n  judge:\n    backend: openai\n")
    assert score("longmemeval", predictions, tmp_path / "o2", "--config", config) == 2
    assert "models.judge.base_url" in capsys.readouterr().err
