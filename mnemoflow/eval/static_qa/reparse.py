"""Re-read a run's stored judge replies with the current verdict readers, without a model call.

A rerun already re-parses cached replies; this shows what a parser change does to an old run:
every judgement whose value or ``parse_ok`` changes, and why. A judgement's replies are decoded
from ``raw_reply`` (:func:`mnemoflow.eval.static_qa.judges.stored_replies`' format: the text itself,
or a JSON list with one entry per ask, each the text or the list of its attempts). Each ask's
verdict is its first attempt that the current reader accepts, as the gateway would have taken it; an
ask none of whose stored attempts parses now is unscored (a re-ask would need a model call). Rows
of judges without a registered kind (LoCoMo's F1, MemoryBench's metrics) are left as they are.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.data.tables import JUDGEMENTS, RUN_KEYS
from mnemoflow.eval.benchmark_metric import JUDGES
from mnemoflow.eval.static_qa.judges import JudgeKind, verdict_parser
from mnemoflow.llm.types import UnparseableReply

_ROW = [name for name, _ in RUN_KEYS] + ["question_id"]


@dataclass(frozen=True)
class Change:
    """One judgement whose verdict the current reader gives differently."""

    row: dict[str, Any]  # the run keys, question_id, metric, judge
    old: float
    new: float
    old_ok: bool
    new_ok: bool

    def line(self) -> str:
        where = " ".join(str(self.row[k]) for k in [*_ROW, "metric"])
        return f"{where}: {_shown(self.old, self.old_ok)} -> {_shown(self.new, self.new_ok)}"


def _shown(value: float, ok: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unscored"
    return f"{value:g}" if ok else f"{value:g} (partly unscored)"


def kinds_by_version() -> dict[str, JudgeKind]:
    """Every registered judge kind by its prompt version (the tail of the ``judge`` column)."""
    return {JUDGES.get(name).version: JUDGES.get(name) for name in JUDGES.names()}


def asks_of(raw_reply: str, repeated: bool) -> list[list[str]]:
    """The attempts of each ask stored in a ``raw_reply``. A flat JSON list of texts is the
    attempts of one re-asked ask, or (``repeated``: the judgement has a ``judge_agreement`` row)
    the replies of several asks each answered at once."""
    try:
        decoded = json.loads(raw_reply)
    except (ValueError, TypeError):
        return [[raw_reply]]
    if not isinstance(decoded, list) or not decoded:
        return [[raw_reply]]  # a reply that is itself JSON (``{"label": ...}``)
    if not all(isinstance(e, str) or _texts(e) for e in decoded):
        return [[raw_reply]]
    if not repeated and all(isinstance(e, str) for e in decoded):
        return [list(decoded)]
    return [[e] if isinstance(e, str) else list(e) for e in decoded]


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _verdicts(kind: JudgeKind, asks: list[list[str]]) -> list[float | None]:
    parse = verdict_parser(kind.parse)
    out: list[float | None] = []
    for attempts in asks:
        verdict = None
        for text in attempts:
            try:
                verdict = parse(text)
                break
            except (UnparseableReply, ValueError):
                continue
        out.append(verdict)
    return out


def reparse(judgements: pd.DataFrame) -> tuple[pd.DataFrame, list[Change]]:
    """The judgements with each verdict re-read from its raw replies, and the changed ones."""
    kinds = kinds_by_version()
    out = judgements.copy()
    if "value_reference" not in out.columns:
        out["value_reference"] = float("nan")
    repeated = set(
        map(tuple, out.loc[out["metric"] == "judge_agreement", _ROW].itertuples(index=False))
    )
    per_ask: dict[tuple, list[float | None]] = {}
    changes: list[Change] = []
    for index, row in out.iterrows():
        kind = kinds.get(str(row["judge"]).rsplit("/", 1)[-1])
        if kind is None or row["metric"] != kind.metric:
            continue
        key = tuple(row[k] for k in _ROW)
        asks = asks_of(str(row["raw_reply"] or ""), key in repeated)
        verdicts = _verdicts(kind, asks)
        per_ask[key] = verdicts
        parsed = [v for v in verdicts if v is not None]
        value = sum(parsed) / len(parsed) if parsed else float("nan")
        ok = len(parsed) == len(verdicts)
        reference = float("nan")
        if kind.reference is not None:
            reference = sum(kind.reference(a[0]) for a in asks) / len(asks)
        old, old_ok = float(row["value"]), bool(row["parse_ok"])
        out.at[index, "value"], out.at[index, "parse_ok"] = value, ok
        out.at[index, "value_reference"] = reference
        if ok != old_ok or not _same(old, value):
            changes.append(Change(_keys(row), old, value, old_ok, ok))
    for index, row in out[out["metric"] == "judge_agreement"].iterrows():
        verdicts = per_ask.get(tuple(row[k] for k in _ROW))
        if verdicts is None:
            continue
        parsed = [v for v in verdicts if v is not None]
        agree = float(len(set(parsed)) == 1) if len(parsed) >= 2 else float("nan")
        old, old_ok = float(row["value"]), bool(row["parse_ok"])
        out.at[index, "value"], out.at[index, "parse_ok"] = agree, len(parsed) >= 2
        if not _same(old, agree) or old_ok != (len(parsed) >= 2):
            changes.append(Change(_keys(row), old, agree, old_ok, len(parsed) >= 2))
    out["parse_ok"] = out["parse_ok"].astype(bool)
    return out[JUDGEMENTS.names], changes


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _keys(row: pd.Series) -> dict[str, Any]:
    return {k: row[k] for k in [*_ROW, "metric", "judge"]}
