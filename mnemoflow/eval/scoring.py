"""From per-question values to scores: micro, task-averaged macro, per type, abstention, CIs.

Per-question values live in one long table (:data:`QUESTION_SCORES`): the judgements (level
"answer": LongMemEval ``accuracy``, LoCoMo ``f1`` and ``j``, ``judge_agreement``) and the
retrieval metrics (level "session" / "turn"). Aggregates go to the SCORES schema:

- ``micro``: mean over questions (LongMemEval "overall accuracy"; LoCoMo overall F1 over all five
  categories, as the official script reports it);
- ``macro``: mean over question types of the per-type means (LongMemEval "task-averaged
  accuracy"; abstention questions stay inside their type, as officially);
- ``type:<question_type>``: per type / LoCoMo category;
- ``abstention`` (LongMemEval accuracy only): mean over ``_abs`` questions;
- ``micro:no-adversarial`` (LoCoMo F1 only): categories 1-4, the figure memory-system papers cite;
- ``ci95_low`` / ``ci95_high``: Wilson 95 % interval of ``judge_agreement`` and of
  LongMemEval's micro accuracy;
- retrieval metrics are named ``<level>_<metric>`` (``session_recall_all@5``).

Values that are NaN (a judge reply that did not parse) are left out of every mean; the
``judge_parse_failures`` score counts them.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pyarrow as pa

from mnemoflow.data.tables import RUN_KEYS, SCORES
from mnemoflow.eval.retrieval import is_abstention

QUESTION_SCORES = pa.schema(
    [
        *RUN_KEYS,
        ("question_id", pa.string()),
        ("question_type", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("level", pa.string()),  # "answer" | "session" | "turn"
    ]
)

RUN_COLUMNS = [name for name, _ in RUN_KEYS]
LLM_JUDGED = ("accuracy", "j")


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (well-behaved at 0 and 1, unlike the normal one)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def question_scores(
    judgements: pd.DataFrame, retrieval: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The per-question long table: judgements at level "answer" plus retrieval rows.

    ``retrieval`` rows must carry the run keys (add them to the output of
    :mod:`mnemoflow.eval.retrieval` before passing it).
    """
    answer = judgements[[*RUN_COLUMNS, "question_id", "question_type", "metric", "value"]].copy()
    answer["level"] = "answer"
    frames = [answer]
    if retrieval is not None and not retrieval.empty:
        frames.append(retrieval[QUESTION_SCORES.names])
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else answer
    return out[QUESTION_SCORES.names].reset_index(drop=True)


def _row(keys: dict[str, Any], metric: str, aggregate: str, value: float, n: int) -> dict:
    return {**keys, "metric": metric, "aggregate": aggregate, "value": float(value), "n": int(n)}


def _aggregates(keys: dict[str, Any], name: str, frame: pd.DataFrame, benchmark: str) -> list:
    rows = []
    valid = frame.dropna(subset=["value"])
    if valid.empty:
        return rows
    rows.append(_row(keys, name, "micro", valid["value"].mean(), len(valid)))
    by_type = valid.groupby("question_type")["value"]
    means = by_type.mean()
    rows.append(_row(keys, name, "macro", means.mean(), len(valid)))
    for qtype, mean in means.items():
        rows.append(_row(keys, name, f"type:{qtype}", mean, by_type.size()[qtype]))
    if name in ("accuracy", "judge_agreement"):
        low, high = wilson(valid["value"].sum(), len(valid))
        rows.append(_row(keys, name, "ci95_low", low, len(valid)))
        rows.append(_row(keys, name, "ci95_high", high, len(valid)))
    if benchmark == "longmemeval" and name == "accuracy":
        abstain = valid[valid["question_id"].map(is_abstention)]
        if not abstain.empty:
            rows.append(_row(keys, name, "abstention", abstain["value"].mean(), len(abstain)))
    if benchmark == "locomo" and name == "f1":
        plain = valid[valid["question_type"] != "adversarial"]
        if not plain.empty:
            rows.append(_row(keys, name, "micro:no-adversarial", plain["value"].mean(), len(plain)))
    return rows


def aggregate(per_question: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """SCORES rows for every run in ``per_question`` (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    for run, frame in per_question.groupby(RUN_COLUMNS, sort=True, dropna=False):
        keys = dict(zip(RUN_COLUMNS, run, strict=True))
        for (level, metric), group in frame.groupby(["level", "metric"], sort=True):
            name = metric if level == "answer" else f"{level}_{metric}"
            rows.extend(_aggregates(keys, name, group, benchmark))
            if level == "answer" and metric in LLM_JUDGED:
                failed = int(group["value"].isna().sum())
                rows.append(_row(keys, "judge_parse_failures", "count", failed, len(group)))
    return pd.DataFrame(rows, columns=SCORES.names)


def summary_table(scores: pd.DataFrame) -> str:
    """A plain-text table of the headline aggregates, for the terminal."""
    keep = scores[
        scores["aggregate"].isin(["micro", "macro", "abstention", "micro:no-adversarial", "count"])
        | scores["aggregate"].str.startswith("type:")
    ]
    keep = keep[~keep["metric"].str.contains("@") | keep["metric"].str.match(r".*@(5|10)$")]
    lines = []
    for run, frame in keep.groupby(RUN_COLUMNS, sort=True):
        lines.append(" ".join(f"{k}={v}" for k, v in zip(RUN_COLUMNS, run, strict=True)))
        width = max(len(m) for m in frame["metric"]) + 2
        awidth = max(len(a) for a in frame["aggregate"]) + 2
        for record in frame.to_dict("records"):
            value = record["value"]
            shown = f"{int(value)}" if record["aggregate"] == "count" else f"{value:.4f}"
            lines.append(
                f"  {record['metric']:<{width}}{record['aggregate']:<{awidth}}{shown:>8}"
                f"  (n={record['n']})"
            )
    return "\n".join(lines)
