"""Why was an answer wrong? Write, read or utilization failure, from evidence ids.

For every wrongly answered question that has evidence ids (turn ids / LoCoMo dia_ids):

- **write failure**: some evidence turn is not among the source turns the memory holds after
  ingest (the memory never stored it);
- **read failure**: every evidence turn is stored, but not every one is among the source ids of the
  items retrieved for the question;
- **utilization failure**: every evidence turn was retrieved and the answer is still wrong.

The order is strict (write before read before utilization) so that each wrong answer gets exactly
one cause, the earliest stage that lost evidence. Wrong answers without evidence ids (LongMemEval
abstention questions) are "undiagnosable". This follows AMemGym's write / read / utilization split;
LongMemEval and LoCoMo offer no such diagnosis.

A question is wrong when its deciding metric is below 0.5: LongMemEval ``accuracy``; LoCoMo ``j``
where judged, else (category 5, or no J judge) the official ``f1``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mnemoflow.data.tables import MEMORY_FAILURES, RUN_KEYS, SCORES

RUN_COLUMNS = [name for name, _ in RUN_KEYS]
CAUSES = (*(f"{kind}_failure" for kind in MEMORY_FAILURES), "undiagnosable")
DECIDING_METRICS = ("accuracy", "j", "f1")
WRONG_BELOW = 0.5


def _deciding_values(judgements: pd.DataFrame) -> pd.DataFrame:
    """One (run, question) -> value row, from the first available metric in DECIDING_METRICS."""
    keys = [*RUN_COLUMNS, "question_id"]
    picked = judgements[judgements["metric"].isin(DECIDING_METRICS)].dropna(subset=["value"])
    rank = picked["metric"].map({m: i for i, m in enumerate(DECIDING_METRICS)})
    picked = picked.assign(_rank=rank).sort_values([*keys, "_rank"])
    return picked.drop_duplicates(keys)[[*keys, "metric", "value"]]


def classify(evidence: list[str], stored: set[str], retrieved: set[str]) -> str:
    if not evidence:
        return "undiagnosable"
    if not all(e in stored for e in evidence):
        return "write_failure"
    if not all(e in retrieved for e in evidence):
        return "read_failure"
    return "utilization_failure"


def diagnose(
    answers: pd.DataFrame,
    judgements: pd.DataFrame,
    questions: pd.DataFrame,
    stored: pd.DataFrame,
    known_episodes: set[str] | None = None,
) -> pd.DataFrame:
    """Per wrong answer: run keys, question_id, question_type, cause, n_evidence.

    ``known_episodes`` lists the episodes whose stored set is known (possibly empty); answers of
    other episodes are "undiagnosable" (a memory that cannot say what it holds). ``None`` means
    every episode's stored set is known.

    ``stored`` lists (episode_id, turn_id) pairs a memory holds, optionally with a ``system``
    column (and ``step``) when several memories are diagnosed at once; without them the same
    stored set applies to every run of the episode.
    """
    keys = [*RUN_COLUMNS, "question_id"]
    verdicts = _deciding_values(judgements)
    merged = answers.merge(verdicts, on=keys, how="inner")
    wrong = merged[merged["value"] < WRONG_BELOW]
    evidence = {
        q["question_id"]: list(q["evidence_ids"] if q["evidence_ids"] is not None else [])
        for q in questions.to_dict("records")
    }
    scope = [c for c in ("system", "step") if c in stored.columns]
    stored_sets: dict[tuple, set[str]] = {}
    for group, frame in stored.groupby([*scope, "episode_id"], sort=False):
        group = group if isinstance(group, tuple) else (group,)
        stored_sets[group] = set(frame["turn_id"])
    rows: list[dict[str, Any]] = []
    for answer in wrong.to_dict("records"):
        key = tuple(answer[c] for c in scope) + (answer["episode_id"],)
        held = stored_sets.get(key, set())
        gold = evidence.get(answer["question_id"], [])
        if known_episodes is not None and answer["episode_id"] not in known_episodes:
            gold = []  # nothing can be said about what this memory wrote
        retrieved = set(answer["retrieved_ids"] if answer["retrieved_ids"] is not None else [])
        rows.append(
            {
                **{c: answer[c] for c in keys},
                "question_type": answer["question_type"],
                "cause": classify(gold, held, retrieved),
                "n_evidence": len(gold),
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "question_type", "cause", "n_evidence"])


def diagnosis_rates(
    diagnosis: pd.DataFrame, answers: pd.DataFrame, judgements: pd.DataFrame
) -> pd.DataFrame:
    """Rates per run and question type (and "all"): counts of each cause over wrong answers.

    Columns: run keys, question_type, n_questions, n_correct, n_wrong, then per cause the count and
    the rate (count / n_wrong; NaN when nothing was wrong). ``n_correct`` counts the answers whose
    deciding value is at least 0.5 (from ``judgements``), so that n_questions - n_correct - n_wrong
    is the number of answers without a verdict (a judge reply that did not parse).
    """
    keys = [*RUN_COLUMNS, "question_id"]
    verdicts = answers.merge(_deciding_values(judgements), on=keys, how="inner")
    correct = verdicts[verdicts["value"] >= WRONG_BELOW]
    out = []
    totals = answers.groupby([*RUN_COLUMNS, "question_type"]).size()
    for run, frame in answers.groupby(RUN_COLUMNS, sort=True):
        run_keys = dict(zip(RUN_COLUMNS, run, strict=True))
        mask = pd.Series(True, index=diagnosis.index)
        right = pd.Series(True, index=correct.index)
        for column, value in run_keys.items():
            mask &= diagnosis[column] == value
            right &= correct[column] == value
        wrong = diagnosis[mask]
        types = sorted(frame["question_type"].unique())
        for qtype in [*types, "all"]:
            subset = wrong if qtype == "all" else wrong[wrong["question_type"] == qtype]
            n_questions = len(frame) if qtype == "all" else int(totals[(*run, qtype)])
            n_correct = (
                int(right.sum())
                if qtype == "all"
                else int((right & (correct["question_type"] == qtype)).sum())
            )
            row = {
                **run_keys,
                "question_type": qtype,
                "n_questions": n_questions,
                "n_correct": n_correct,
                "n_wrong": len(subset),
            }
            for cause in CAUSES:
                count = int((subset["cause"] == cause).sum())
                row[cause] = count
                row[f"{cause}_rate"] = count / len(subset) if len(subset) else float("nan")
            out.append(row)
    columns = [*RUN_COLUMNS, "question_type", "n_questions", "n_correct", "n_wrong"]
    for cause in CAUSES:
        columns += [cause, f"{cause}_rate"]
    return pd.DataFrame(out, columns=columns)


def diagnosis_scores(rates: pd.DataFrame) -> pd.DataFrame:
    """The rates as SCORES rows (metric ``<cause>_rate``, aggregate ``micro`` or ``type:<t>``)."""
    rows = []
    for record in rates.to_dict("records"):
        aggregate = (
            "micro" if record["question_type"] == "all" else f"type:{record['question_type']}"
        )
        for cause in CAUSES:
            value = record[f"{cause}_rate"]
            if pd.isna(value):
                continue
            rows.append(
                {
                    **{c: record[c] for c in RUN_COLUMNS},
                    "metric": f"{cause}_rate",
                    "aggregate": aggregate,
                    "value": float(value),
                    "n": int(record["n_wrong"]),
                }
            )
    return pd.DataFrame(rows, columns=SCORES.names)


#: Causes as the report's DIAGNOSIS table names them.
_REPORT_NAMES = {cause: cause.removesuffix("_failure") for cause in CAUSES}


def report_rows(rates: pd.DataFrame) -> pd.DataFrame:
    """The rates in the report's DIAGNOSIS schema: one row per run, question type and outcome.

    Unlike the ``<cause>_rate`` scores (shares of the wrong answers), these rates are shares of
    all ``n`` questions, so that a run's outcomes (correct, the four causes, and "unjudged" when
    some verdicts are missing) add up to 1: the report stacks them into one bar per run.
    """
    rows = []
    for record in rates.to_dict("records"):
        n = int(record["n_questions"])
        if not n:
            continue
        counts = {"correct": record["n_correct"]}
        counts |= {failure: record[cause] for cause, failure in _REPORT_NAMES.items()}
        unjudged = n - record["n_correct"] - record["n_wrong"]
        if unjudged:
            counts["unjudged"] = unjudged
        for outcome, count in counts.items():
            rows.append(
                {
                    "benchmark": record["benchmark"],
                    "system": record["system"],
                    "step": record["step"],
                    "question_type": record["question_type"],
                    "failure": outcome,
                    "rate": count / n,
                    "n": n,
                }
            )
    return pd.DataFrame(
        rows, columns=["benchmark", "system", "step", "question_type", "failure", "rate", "n"]
    )
