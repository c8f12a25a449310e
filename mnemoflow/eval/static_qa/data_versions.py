"""One run scored on two data versions: the gold as released, and with its errata overlay applied.

The run answered every released question and was judged against the released gold. Its questions
carry the overlay's errata in ``meta.errata`` (``mnemoflow.data.errata``); here the same answers
are scored on the corrected version, per metric:

- a ``drop``ped question leaves both the corrected value and its count;
- ``f1`` (LoCoMo's official token F1, model-free) is recomputed against a ``correct``ed answer;
- ``turn_evidence_recall`` is recomputed against corrected evidence (``evidence`` and ``correct``
  entries that give it), from the memory's ranking in the answers;
- a judged verdict (``j``, ``accuracy``, …) of a ``correct``ed question no longer says anything:
  it needs a judge call against the new gold (``rejudged``: verdicts on :func:`corrected_gold`,
  made by the caller with the run's own judge). Without such a verdict the question is left out
  of the corrected value and counted in ``rejudge``, so the corrected value is over the questions
  whose verdict still holds (unchanged or evidence-only).

The released value is recomputed from the same per-question rows, so it equals the run's own
``micro`` value (tests pin that on a workflow run).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from mnemoflow.eval.metrics.locomo_f1 import locomo_f1
from mnemoflow.eval.static_qa.retrieval import evidence_recall

COLUMNS = [
    "benchmark",
    "system",
    "step",
    "metric",
    "released",
    "n_released",
    "corrected",
    "n_corrected",
    "rescored",
    "dropped",
    "rejudge",
]

#: Metrics recomputed from the answer itself; every other judged metric needs a re-judge.
RESCORED = ("f1",)
RECALL = "turn_evidence_recall"


def _meta(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    return json.loads(raw) if raw else {}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_versions(
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judgements: pd.DataFrame,
    *,
    recall: bool = False,
    rejudged: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per (benchmark, system, step, metric): the micro value on the released and the corrected
    version, with how many questions were re-scored, dropped and would need re-judging.

    ``rejudged``: judgements (JUDGEMENTS rows) of corrected questions against their corrected
    gold; a verdict found there is used and counted as re-scored instead of ``rejudge``."""
    verdicts: dict[tuple, float] = {}
    if rejudged is not None and len(rejudged):
        found = rejudged[rejudged["value"].notna()]
        verdicts = (
            found.groupby(["benchmark", "system", "step", "metric", "question_id"])["value"]
            .mean()
            .to_dict()
        )
    info = {
        row["question_id"]: (_meta(row["meta"]), list(row["evidence_ids"]), row["answer"])
        for row in questions.to_dict("records")
    }
    response = {
        (r["benchmark"], r["system"], r["step"], r["question_id"]): r
        for r in answers.to_dict("records")
    }
    rows: list[dict[str, Any]] = []
    judged = judgements[judgements["value"].notna()]
    per_item = judged.groupby(
        ["benchmark", "system", "step", "metric", "question_id"], as_index=False
    )["value"].mean()
    for (benchmark, system, step, metric), group in per_item.groupby(
        ["benchmark", "system", "step", "metric"], sort=True
    ):
        released, corrected = [], []
        rescored = dropped = rejudge = 0
        for qid, value in zip(group["question_id"], group["value"], strict=True):
            released.append(float(value))
            meta = info.get(qid, ({}, [], ""))[0]
            erratum = meta.get("errata")
            action = erratum["action"] if erratum else None
            if action == "drop":
                dropped += 1
            elif action == "correct" and metric in RESCORED:
                reply = response.get((benchmark, system, step, qid), {}).get("response", "")
                corrected.append(locomo_f1(reply, erratum["answer"], int(meta["category"])))
                rescored += 1
            elif action == "correct" and (benchmark, system, step, metric, qid) in verdicts:
                corrected.append(float(verdicts[(benchmark, system, step, metric, qid)]))
                rescored += 1
            elif action == "correct":
                rejudge += 1
            else:
                corrected.append(float(value))
        rows.append(
            _row(benchmark, system, step, metric, released, corrected, rescored, dropped, rejudge)
        )
    if recall:
        rows += _recall_rows(info, answers)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["benchmark", "system", "step", "metric"]).reset_index(drop=True)


def _row(benchmark, system, step, metric, released, corrected, rescored, dropped, rejudge):
    return {
        "benchmark": benchmark,
        "system": system,
        "step": int(step),
        "metric": metric,
        "released": _mean(released),
        "n_released": len(released),
        "corrected": _mean(corrected),
        "n_corrected": len(corrected),
        "rescored": rescored,
        "dropped": dropped,
        "rejudge": rejudge,
    }


def _recall_rows(info: dict, answers: pd.DataFrame) -> list[dict[str, Any]]:
    """Evidence recall of the memory's ranking, on the released and the corrected evidence.

    Only for benchmarks whose answers carry a ranking (a run whose every ranking is empty, e.g.
    no memory, still gets its zeros); questions without evidence are left out, as in the run.
    """
    rows = []
    if answers.empty:
        return rows
    for (benchmark, system, step), group in answers.groupby(
        ["benchmark", "system", "step"], sort=True
    ):
        released, corrected = [], []
        rescored = dropped = 0
        for qid, ranked in zip(group["question_id"], group["ranked_ids"], strict=True):
            meta, evidence, _ = info.get(qid, ({}, [], ""))
            value = evidence_recall(evidence, list(ranked))
            if value is None:
                continue
            released.append(value)
            erratum = meta.get("errata") or {}
            if erratum.get("action") == "drop":
                dropped += 1
            elif erratum.get("evidence") is not None:
                fixed = evidence_recall(erratum["evidence"], list(ranked))
                if fixed is not None:
                    corrected.append(fixed)
                rescored += 1
            else:
                corrected.append(value)
        rows.append(
            _row(benchmark, system, step, RECALL, released, corrected, rescored, dropped, 0)
        )
    return rows


def corrected_gold(questions: pd.DataFrame) -> pd.DataFrame:
    """The ``correct``ed questions with their corrected answer (and evidence, where given) in
    place of the released one: what a judge reads to re-judge them."""
    rows = []
    for row in questions.to_dict("records"):
        erratum = _meta(row["meta"]).get("errata") or {}
        if erratum.get("action") != "correct":
            continue
        row["answer"] = erratum["answer"]
        if erratum.get("evidence") is not None:
            row["evidence_ids"] = list(erratum["evidence"])
        rows.append(row)
    return pd.DataFrame(rows, columns=questions.columns)
