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
- ``ci95_low`` / ``ci95_high``: Wilson 95 % interval of the micro value of the LLM-judged
  metrics (LongMemEval ``accuracy``, LoCoMo ``j``) and of ``judge_agreement``;
- retrieval metrics are named ``<level>_<metric>`` (``session_recall_all@5``).

Values that are NaN (a judge reply that did not parse, an answer that failed) are left out of
every mean; the ``judge_parse_failures`` score counts the judge replies that did not parse.
Because the two denominators can differ for the LLM-judged metrics, each of them is also
reported both ways (:func:`denominator_rows`):
``<metric>:scored`` (micro, over the judged questions: the plain metric's own convention),
``<metric>:all`` (micro, macro, per type, abstention, CI: over every question, an unjudged one
counted wrong) and ``<metric>:unscored`` (micro: how many were not judged, ``n`` = all).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mnemoflow.data.tables import QUESTION_SCORES, RUN_KEYS, SCORES
from mnemoflow.eval.static_qa.retrieval import is_abstention
from mnemoflow.intervals import wilson_interval

RUN_COLUMNS = [name for name, _ in RUN_KEYS]
LLM_JUDGED = ("accuracy", "j")


def question_scores(
    judgements: pd.DataFrame, retrieval: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The per-question long table: judgements at level "answer" plus retrieval rows.

    ``retrieval`` rows must carry the run keys (add them to the output of
    :mod:`mnemoflow.eval.static_qa.retrieval` before passing it).
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
    if name.removesuffix(ALL) in (*LLM_JUDGED, "judge_agreement"):
        low, high = wilson_interval(valid["value"].sum(), len(valid))
        rows.append(_row(keys, name, "ci95_low", low, len(valid)))
        rows.append(_row(keys, name, "ci95_high", high, len(valid)))
    if benchmark == "longmemeval" and name.removesuffix(ALL) == "accuracy":
        abstain = valid[valid["question_id"].map(is_abstention)]
        if not abstain.empty:
            rows.append(_row(keys, name, "abstention", abstain["value"].mean(), len(abstain)))
    if benchmark == "locomo" and name == "f1":
        plain = valid[valid["question_type"] != "adversarial"]
        if not plain.empty:
            rows.append(_row(keys, name, "micro:no-adversarial", plain["value"].mean(), len(plain)))
    return rows


#: Name suffixes of the two denominators of a metric some items of which may go unscored.
SCORED, ALL, UNSCORED = ":scored", ":all", ":unscored"


def denominator_rows(
    keys: dict[str, Any], name: str, frame: pd.DataFrame, benchmark: str
) -> list[dict]:
    """A judged metric both ways: ``name:scored`` (micro over the items with a value),
    ``name:all`` (every aggregate over all items, a NaN counted as 0, i.e. wrong) and
    ``name:unscored`` (the number of NaN items, ``n`` = all items)."""
    valid = frame["value"].dropna()
    unscored = int(frame["value"].isna().sum())
    rows = []
    if len(valid):
        rows.append(_row(keys, name + SCORED, "micro", valid.mean(), len(valid)))
    rows.extend(_aggregates(keys, name + ALL, frame.fillna({"value": 0.0}), benchmark))
    rows.append(_row(keys, name + UNSCORED, "micro", unscored, len(frame)))
    return rows


def unanswered(judgements: pd.DataFrame) -> pd.DataFrame:
    """(run keys, question_id) of the judgements without a judge's reply: an answer that failed
    (never asked about) or a judge call that never came back. Their NaN is not a parse failure."""
    silent = judgements["value"].isna() & (judgements["raw_reply"].fillna("") == "")
    return judgements.loc[silent, [*RUN_COLUMNS, "question_id"]].drop_duplicates()


def aggregate(
    per_question: pd.DataFrame, benchmark: str, silent: pd.DataFrame | None = None
) -> pd.DataFrame:
    """SCORES rows for every run in ``per_question`` (see the module docstring). ``silent``
    (:func:`unanswered`) names the unscored questions no judge replied to: they count in
    ``<metric>:unscored`` but not in ``judge_parse_failures``."""
    rows: list[dict[str, Any]] = []
    silent_ids = (
        set()
        if silent is None
        else set(silent[[*RUN_COLUMNS, "question_id"]].itertuples(index=False, name=None))
    )
    for run, frame in per_question.groupby(RUN_COLUMNS, sort=True, dropna=False):
        keys = dict(zip(RUN_COLUMNS, run, strict=True))
        for (level, metric), group in frame.groupby(["level", "metric"], sort=True):
            name = metric if level == "answer" else f"{level}_{metric}"
            rows.extend(_aggregates(keys, name, group, benchmark))
            if level == "answer" and metric in LLM_JUDGED:
                replied = [(*run, q) not in silent_ids for q in group["question_id"]]
                failed = int(group["value"].isna().to_numpy()[replied].sum())
                rows.append(_row(keys, "judge_parse_failures", "count", failed, len(group)))
                rows.extend(denominator_rows(keys, name, group, benchmark))
    return pd.DataFrame(rows, columns=SCORES.names)


REFERENCE_DISAGREEMENTS = "judge_reference_disagreements"


def reference_rows(judgements: pd.DataFrame) -> pd.DataFrame:
    """Per run, how many verdicts the reference's own parse reads differently
    (``value_reference``, docs/metrics.md): a ``judge_reference_disagreements`` count whose ``n``
    is the judgements the reference read. A verdict left unscored where the reference read one
    counts as a disagreement. No row for a run whose judge has no reference reading."""
    rows: list[dict[str, Any]] = []
    if "value_reference" not in judgements.columns:
        return pd.DataFrame(rows, columns=SCORES.names)
    read = judgements[judgements["value_reference"].notna()]
    for run, group in read.groupby(RUN_COLUMNS, sort=True, dropna=False):
        keys = dict(zip(RUN_COLUMNS, run, strict=True))
        differ = group["value"].isna() | (group["value"] != group["value_reference"])
        rows.append(_row(keys, REFERENCE_DISAGREEMENTS, "count", int(differ.sum()), len(group)))
    return pd.DataFrame(rows, columns=SCORES.names)


#: The retrieval figures the official LongMemEval script prints, plus LoCoMo's evidence recall.
SUMMARY_RETRIEVAL = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10", "recall_all@50")


def summary_table(scores: pd.DataFrame) -> str:
    """A compact plain-text summary per run: headline aggregates, per-type table, retrieval."""
    lines: list[str] = []
    for run, frame in scores.groupby(RUN_COLUMNS, sort=True):
        lines.append(" ".join(f"{k}={v}" for k, v in zip(RUN_COLUMNS, run, strict=True)))
        value = {
            (r["metric"], r["aggregate"]): (r["value"], r["n"]) for r in frame.to_dict("records")
        }
        headline = sorted(
            {m for m, _ in value if "@" not in m and not m.startswith(("session_", "turn_"))}
        )
        for metric in headline:
            parts = []
            for agg in ("micro", "macro", "abstention", "micro:no-adversarial", "count"):
                if (metric, agg) in value:
                    v, n = value[(metric, agg)]
                    shown = f"{int(v)}" if agg == "count" else f"{v:.4f}"
                    parts.append(f"{agg} {shown} (n={n})")
            lines.append(f"  {metric:<24}" + "   ".join(parts))
        types = sorted({a[5:] for _, a in value if a.startswith("type:")})
        answer_metrics = [m for m in headline if any((m, f"type:{t}") in value for t in types)]
        if types and answer_metrics:
            width = max(len(t) for t in types) + 2
            lines.append(
                "  " + " " * width + "".join(f"{m:>12}" for m in answer_metrics) + "       n"
            )
            for qtype in types:
                cells, count = [], 0
                for metric in answer_metrics:
                    v, n = value.get((metric, f"type:{qtype}"), (float("nan"), 0))
                    cells.append(f"{v:>12.4f}")
                    count = max(count, n)
                lines.append(f"  {qtype:<{width}}" + "".join(cells) + f"{count:>8}")
        for level in ("session", "turn"):
            shown = [
                f"{m} {value[(f'{level}_{m}', 'micro')][0]:.4f}"
                for m in (*SUMMARY_RETRIEVAL, "evidence_recall")
                if (f"{level}_{m}", "micro") in value
            ]
            if shown:
                n = max(
                    value[(f"{level}_{m}", "micro")][1]
                    for m in (*SUMMARY_RETRIEVAL, "evidence_recall")
                    if (f"{level}_{m}", "micro") in value
                )
                lines.append(f"  {level}-level retrieval (n={n}): " + ", ".join(shown))
    return "\n".join(lines)
