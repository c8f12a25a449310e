"""Re-scoring stored answers without generating: predictions (+ retrievals) -> judgements, scores.

Input shapes are LongMemEval's official ones, so that answers produced elsewhere can be scored:

- predictions: JSONL (or one JSON list) of ``{"question_id": ..., "hypothesis": ...}``; LoCoMo ids
  are ``{sample_id}_q{index}`` as the unified tables write them;
- retrievals: JSONL of ``{"question_id": ..., "retrieval_results": {"ranked_items":
  [{"corpus_id": ...}, ...]}}`` (LongMemEval's retrieval log). LongMemEval corpus ids are session
  ids or turn ids ``{session_id}_{k}``, with the official ``noans_`` relabelling undone; LoCoMo
  corpus ids are dia_ids ("D1:3").

Both paths compute retrieval metrics and aggregates with :func:`score_judged`: the workflow's score
rule (``protocols.static_qa.score``, after its judge rule ran
``eval.static_qa.judges.judge_answers``) and :func:`score_tables` (``mnemoflow score``, which judges
with the same function), so that ``mnemoflow score`` on the workflow's answers gives the same
numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.tables import (
    ANSWERS,
    JUDGEMENTS,
    QUESTION_SCORES,
    SCORES,
    as_list,
    write_atomic_text,
    write_table,
)
from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.eval.static_qa.retrieval import locomo_retrieval_rows, longmemeval_retrieval_rows
from mnemoflow.eval.static_qa.scoring import (
    aggregate,
    question_scores,
    reference_rows,
    summary_table,
    unanswered,
)

BENCHMARKS = ("longmemeval", "locomo")


class InputError(ValueError):
    """A predictions or retrievals file is malformed; the message names file, line and field."""


def _records(path: Path) -> list[tuple[int, Any]]:
    """(line number, parsed JSON) for a JSONL file, or (index, item) for a file holding a list."""
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from exc
        return [(i, item) for i, item in enumerate(items)]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number}: not valid JSON: {exc.msg}") from exc
    return out


def _where(path: Path, number: int, text: str) -> str:
    return f"{path}: {'record' if text.lstrip().startswith('[') else 'line'} {number}"


def prediction_records(path: str | Path) -> list[tuple[str, Any]]:
    """(where, parsed JSON) of each record of a predictions file, JSON lines or one JSON list
    (``PATH: line N`` / ``PATH: record I``), as :func:`read_predictions` reads it."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    return [(_where(path, number, text), record) for number, record in _records(path)]


def read_predictions(path: str | Path, known_ids: set[str] | None = None) -> pd.DataFrame:
    """question_id, hypothesis; every id unique and (when ``known_ids``) in the benchmark."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    rows, seen = [], {}
    for number, record in _records(path):
        where = _where(path, number, text)
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected an object with question_id and hypothesis")
        for key in ("question_id", "hypothesis"):
            if key not in record:
                raise InputError(f"{where}: missing field '{key}'")
        qid = str(record["question_id"])
        hypothesis = record["hypothesis"]
        if not isinstance(hypothesis, str):
            raise InputError(f"{where} ({qid}): 'hypothesis' must be a string")
        if qid in seen:
            raise InputError(f"{where}: question_id {qid!r} repeats line {seen[qid]}")
        if known_ids is not None and qid not in known_ids:
            raise InputError(f"{where}: question_id {qid!r} is not in the benchmark data")
        seen[qid] = number
        rows.append({"question_id": qid, "hypothesis": hypothesis})
    if not rows:
        raise InputError(f"{path}: no predictions")
    return pd.DataFrame(rows, columns=["question_id", "hypothesis"])


def read_retrievals(path: str | Path, known_ids: set[str] | None = None) -> dict[str, list[str]]:
    """question_id -> ranked corpus ids from a LongMemEval-shaped retrieval log."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    for number, record in _records(path):
        where = _where(path, number, text)
        if not isinstance(record, dict) or "question_id" not in record:
            raise InputError(f"{where}: missing field 'question_id'")
        qid = str(record["question_id"])
        results = record.get("retrieval_results")
        if not isinstance(results, dict) or not isinstance(results.get("ranked_items"), list):
            raise InputError(f"{where} ({qid}): missing field 'retrieval_results.ranked_items'")
        ranked = []
        for position, item in enumerate(results["ranked_items"]):
            if not isinstance(item, dict) or "corpus_id" not in item:
                raise InputError(
                    f"{where} ({qid}): retrieval_results.ranked_items[{position}] has no "
                    "'corpus_id'"
                )
            ranked.append(str(item["corpus_id"]).replace("noans_", "answer_"))
        if known_ids is not None and qid not in known_ids:
            raise InputError(f"{where}: question_id {qid!r} is not in the benchmark data")
        if qid in out:
            raise InputError(f"{where}: question_id {qid!r} appears twice")
        out[qid] = ranked
    return out


def answers_from_predictions(
    benchmark: str,
    questions: pd.DataFrame,
    predictions: pd.DataFrame,
    retrievals: dict[str, list[str]] | None = None,
    system: str = "predictions",
    protocol: str = "rescore",
) -> pd.DataFrame:
    """An ANSWERS table for predictions made outside the workflow (no model, no token counts)."""
    by_id = questions.set_index("question_id")
    rows = []
    for record in predictions.to_dict("records"):
        question = by_id.loc[record["question_id"]]
        rows.append(
            {
                "benchmark": benchmark,
                "system": system,
                "protocol": protocol,
                "step": 0,
                "episode_id": question["episode_id"],
                "question_id": record["question_id"],
                "question_type": question["question_type"],
                "response": record["hypothesis"],
                "retrieved_ids": list((retrievals or {}).get(record["question_id"], [])),
                "ranked_ids": list((retrievals or {}).get(record["question_id"], [])),
                "context_tokens": 0,
                "model": "",
                "cache_hit": False,
                "tokens_in": 0,
                "tokens_out": 0,
                "latency_s": 0.0,
            }
        )
    return pd.DataFrame(rows, columns=ANSWERS.names)


@dataclass
class Scored:
    judgements: pd.DataFrame
    question_scores: pd.DataFrame
    scores: pd.DataFrame


@dataclass(frozen=True)
class Ranking:
    """Which ranking retrieval is scored on, and how: ``rankings`` (question id -> ranked ids)
    when given, else the answers' non-empty ``ranked_ids`` (never ``retrieved_ids``, which are in
    the reader's display order); LongMemEval's ``granularity`` and official turn-evidence rule."""

    rankings: dict[str, list[str]] | None = None
    granularity: str = "auto"
    evidence_turns_only: bool = False


def retrieval_rows(
    benchmark: str,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    answers: pd.DataFrame,
    ranking: Ranking = Ranking(),
) -> pd.DataFrame:
    """Per-question retrieval metrics with run keys, on ``ranking``'s ranks."""
    rankings = ranking.rankings
    frames = []
    for run, frame in answers.groupby(["benchmark", "system", "protocol", "step"], sort=True):
        if rankings is not None:
            ranked = {qid: rankings[qid] for qid in frame["question_id"] if qid in rankings}
        else:
            ranked = {qid: ids for qid, ids in answer_rankings(frame).items() if ids}
        subset = questions[questions["question_id"].isin(ranked)]
        if benchmark == "longmemeval":
            rows = longmemeval_retrieval_rows(
                subset,
                ranked,
                sessions,
                ranking.granularity,
                evidence_turns_only=ranking.evidence_turns_only,
            )
        else:
            rows = locomo_retrieval_rows(subset, ranked)
        for column, value in zip(["benchmark", "system", "protocol", "step"], run, strict=True):
            rows[column] = value
        frames.append(rows)
    if not frames:
        return pd.DataFrame(columns=QUESTION_SCORES.names)
    return pd.concat(frames, ignore_index=True)[QUESTION_SCORES.names]


def answer_rankings(answers: pd.DataFrame) -> dict[str, list[str]]:
    """question_id -> the memory's ranking (``ranked_ids``) of every answered question."""
    return {
        str(row["question_id"]): [str(i) for i in as_list(row["ranked_ids"])]
        for row in answers.to_dict("records")
    }


def score_judged(
    benchmark: str,
    judgements: pd.DataFrame,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    answers: pd.DataFrame,
    ranking: Ranking = Ranking(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-question scores, aggregates) of judged answers: the one scoring path of both callers."""
    retrieval = retrieval_rows(benchmark, questions, sessions, answers, ranking)
    per_question = question_scores(judgements, retrieval)
    scores = aggregate(per_question, benchmark, unanswered(judgements))
    reference = reference_rows(judgements)
    if not reference.empty:
        scores = pd.concat([scores, reference], ignore_index=True)
    return per_question, scores


async def score_tables(
    gateway,
    benchmark: str,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    answers: pd.DataFrame,
    ranking: Ranking = Ranking(),
    repeats: int = 1,
    seed: int = 0,
) -> Scored:
    """Judge the answers, compute retrieval metrics, aggregate: the workflow's score step."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"score: benchmark must be one of {list(BENCHMARKS)}, got {benchmark!r}")
    judgements = await judge_answers(gateway, benchmark, questions, answers, repeats, seed)
    per_question, scores = score_judged(
        benchmark, judgements, questions, sessions, answers, ranking
    )
    return Scored(judgements, per_question, scores)


def write_scored(scored: Scored, out: str | Path, provenance: dict[str, Any]) -> list[Path]:
    """Write the three tables and the judge provenance; every file atomically."""
    out = Path(out)
    return [
        write_table(scored.judgements, out / "judgements.parquet", JUDGEMENTS),
        write_table(scored.question_scores, out / "question_scores.parquet", QUESTION_SCORES),
        write_table(scored.scores, out / "scores.parquet", SCORES),
        write_atomic_text(out / "judge.json", json.dumps(provenance, indent=2) + "\n"),
    ]


def summarize(scored: Scored) -> str:
    return summary_table(scored.scores)
