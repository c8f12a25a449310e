"""AMemGym scores from raw replies: accuracy, random and upper-bound baselines, memory score, and
the write / read / utilization diagnosis -- pure functions over tables, shared by ``mnemoflow
score --benchmark amemgym`` and the workflow's score job.

Inputs (one row per reply; ``period`` and ``question_index`` 0-based in data.json order):

- ``replies``: ``user_id, period, question_index, reply`` (+ optional ``option_order``, the
  data.json choice indices in the order they were shown, null = data.json order; + optional
  ``parse_ok``, false when the gateway already gave up on the reply). Parsed strictly with
  :func:`parse_answer`: an unparseable reply is a parse failure, scored wrong and counted -- the
  reference scores a uniformly random option instead, and reads ``0`` as the last option.
- ``upper``: ``user_id, question_index, option_index, reply`` (+ ``option_order``): the model,
  without memory, told the state of option ``option_index`` (0-based data.json order); right when
  it picks an option with that state.
- ``recall``: ``user_id, period, question_index, reply``: the recall prompt's ``{type: choice}``
  reply from the period's memory snapshot (:func:`parse_recall`; unparseable = nothing recalled).

Definitions, following the reference (see docs/amemgym.md for every difference):

- random = mean over questions of the share of options holding the true state (the reference's
  mean over options of their accuracy; 1 / number of options when no state repeats);
- upper bound of (user, period, question) = the upper reply for the option holding the period's
  true state, looked up per question. ``reference_upper_bound=True`` reproduces the reference's
  dict keyed by the state tuple alone, built over all questions of a user in order, so that a
  later question with the same value tuple overwrites an earlier one;
- memory score = (o - r) / (b - r) per (user, period) over its questions first, then averaged
  (the reference's order; a ratio of global means is a different number). Where b == r the ratio
  is undefined: NaN, left out of the mean and counted in ``memory_score_undefined``;
- diagnosis: per required type, read = recalled right now, write = recalled right at the
  checkpoint where the type last changed (period 0 for a type that never changed). A wrong answer
  with no wrong recall is a utilization failure; otherwise w wrong-at-write and r
  wrong-only-now types give write w/(w+r) and read r/(w+r). So, per period, write + read +
  utilization = 1 - accuracy.

``scores`` has one row per (period, metric) and a mean row per metric with ``period`` null:
accuracy / random / upper_bound over every (user, period, question), memory_score over every
defined (user, period), failure rates the mean of the per-period rates (as the reference reports
them), counts (``parse_failures``, ``memory_score_undefined``, ``upper_below_random``: (user,
period) pairs whose upper bound is below random, where the memory score's sign is reversed;
``upper_parse_failures``, ``recall_parse_failures``) summed. Accuracy is also given both ways:
``accuracy:scored`` over the replies that parsed, ``accuracy:all`` over all of them (= accuracy)
and ``accuracy:unscored``, the parse failures (= ``parse_failures``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import AmemUser, gold_choice, question_id, true_state
from mnemoflow.data.jsonstream import iter_jsonl
from mnemoflow.data.validate import DataError
from mnemoflow.eval.amemgym.amemgym_replies import parse_answer, parse_recall
from mnemoflow.llm.types import UnparseableReply

QUESTION_SCORE_COLUMNS = [
    "user_id",
    "period",
    "question_index",
    "question_id",
    "n_options",
    "chosen_option",  # data.json index; null on a parse failure
    "gold_option",  # data.json index of the choice holding the true state
    "correct",
    "parse_ok",
    "random",
    "upper_bound",  # null without upper replies
    "upper_parse_ok",
    "recall_correct",  # share of required types recalled right now; null without recall
    "recall_parse_ok",
    "write_failure",
    "read_failure",
    "utilization_failure",
    "failure",  # none | write | read | write+read | utilization; null without recall
]
SCORE_COLUMNS = ["period", "metric", "value", "n"]
FAILURE_METRICS = ("write_failure_rate", "read_failure_rate", "utilization_failure_rate")
#: Column order of the printed table.
SCORE_ORDER = (
    "accuracy",
    "accuracy:scored",
    "random",
    "upper_bound",
    "memory_score",
    *FAILURE_METRICS,
    "parse_failures",
    "memory_score_undefined",
    "upper_below_random",
    "upper_parse_failures",
    "recall_parse_failures",
)
#: Columns that hold integers or booleans with nulls: kept as Python objects (None, not NaN).
NULLABLE = ("chosen_option", "upper_parse_ok", "recall_parse_ok")

_REQUIRED = {
    "replies": ("user_id", "period", "question_index", "reply"),
    "upper": ("user_id", "question_index", "option_index", "reply"),
    "recall": ("user_id", "period", "question_index", "reply"),
}


def score_replies(
    users: list[AmemUser],
    replies: pd.DataFrame,
    upper: pd.DataFrame | None = None,
    recall: pd.DataFrame | None = None,
    *,
    reference_upper_bound: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(question_scores, scores) of checkpoint replies; see the module docstring."""
    by_id = {user.id: user for user in users}
    upper_scores = _upper_scores(by_id, upper) if upper is not None else None
    recalled = _recall_scores(by_id, recall) if recall is not None else None
    rows = []
    for record, loc, user, question, period in _rows_of(by_id, replies, "replies"):
        n = len(question.choices)
        chosen = _chosen(record, n, loc)
        gold = gold_choice(question, period)
        truth = true_state(question, period)
        correct = chosen is not None and question.choices[chosen].state == truth
        row = {
            "user_id": user.id,
            "period": period.index,
            "question_index": question.index,
            "question_id": question_id(user.id, period.index, question.index),
            "n_options": n,
            "chosen_option": chosen,
            "gold_option": gold,
            "correct": float(correct),
            "parse_ok": chosen is not None,
            "random": sum(choice.state == truth for choice in question.choices) / n,
            "upper_bound": None,
            "upper_parse_ok": None,
            "recall_correct": None,
            "recall_parse_ok": None,
            "write_failure": None,
            "read_failure": None,
            "utilization_failure": None,
            "failure": None,
        }
        if upper_scores is not None:
            row["upper_bound"], row["upper_parse_ok"] = _upper_of(
                upper_scores, user, question, period, gold, reference_upper_bound
            )
        if recalled is not None:
            row.update(_diagnose(recalled, user, question, period, correct))
        rows.append(row)
    question_scores = _frame(rows, QUESTION_SCORE_COLUMNS, NULLABLE)
    return question_scores, aggregate(question_scores)


def memory_scores(question_scores: pd.DataFrame) -> pd.DataFrame:
    """Per (user, period): o, r, b over its questions, (o - r) / (b - r); NaN where b == r."""
    grouped = question_scores.groupby(["user_id", "period"], sort=True)
    per = grouped[["correct", "random", "upper_bound"]].mean().reset_index()
    per = per.rename(columns={"correct": "overall"})
    gap = per["upper_bound"] - per["random"]
    defined = gap.abs() > 1e-12
    per["memory_score"] = ((per["overall"] - per["random"]) / gap).where(defined)
    return per


def aggregate(question_scores: pd.DataFrame) -> pd.DataFrame:
    """The ``scores`` table: one row per (period, metric) plus the mean rows (``period`` null)."""
    q = question_scores
    has_upper = q["upper_bound"].notna().any()
    has_recall = q["failure"].notna().any()
    memory = (
        memory_scores(q.assign(upper_bound=q["upper_bound"].astype(float))) if has_upper else None
    )
    rows: list[dict[str, Any]] = []
    failure_rates: dict[str, list[float]] = {name: [] for name in FAILURE_METRICS}
    for period, group in q.groupby("period", sort=True):
        at = memory[memory["period"] == period] if has_upper else None
        rows += _score_rows(period, group, at)
        if has_recall:
            for name in FAILURE_METRICS:
                rate = group[name.removesuffix("_rate")].astype(float).sum() / len(group)
                failure_rates[name].append(rate)
                rows.append(_row(period, name, rate, len(group)))
        rows += _counts(period, group, has_upper, has_recall)
    rows += _score_rows(None, q, memory)
    if has_recall:
        for name in FAILURE_METRICS:
            rows.append(_row(None, name, _mean(pd.Series(failure_rates[name])), len(q)))
    rows += _counts(None, q, has_upper, has_recall)
    return _frame(rows, SCORE_COLUMNS, ("period",))


def _score_rows(period, group: pd.DataFrame, memory: pd.DataFrame | None) -> list[dict]:
    """Accuracy and random over the group's questions; with upper replies the upper bound over
    them and the memory score over the (user, period) pairs of ``memory`` (already per pair)."""
    n = len(group)
    parsed = group["parse_ok"].astype(bool)
    rows = [
        _row(period, "accuracy", _mean(group["correct"]), n),
        _row(period, "random", _mean(group["random"]), n),
        # the two denominators: parsed replies only, and every reply (= accuracy: the reference's
        # convention, a parse failure counted wrong), with the number of parse failures
        _row(period, "accuracy:scored", _mean(group["correct"][parsed]), int(parsed.sum())),
        _row(period, "accuracy:all", _mean(group["correct"]), n),
        _row(period, "accuracy:unscored", float((~parsed).sum()), n),
    ]
    if memory is not None:
        scored = memory["memory_score"].dropna()
        rows += [
            _row(period, "upper_bound", _mean(group["upper_bound"].astype(float)), n),
            _row(period, "memory_score", _mean(scored), len(scored)),
            _row(period, "memory_score_undefined", float(len(memory) - len(scored)), len(memory)),
            _row(period, "upper_below_random", float(_below(memory)), len(memory)),
        ]
    return rows


def _below(memory: pd.DataFrame) -> int:
    """(user, period) pairs whose upper bound is below random: their memory score's sign flips."""
    return int((memory["upper_bound"] < memory["random"] - 1e-12).sum())


def _counts(period, group: pd.DataFrame, has_upper: bool, has_recall: bool) -> list[dict]:
    """Parse failures of the replies, and of the upper-bound / recall replies used."""
    n = len(group)
    rows = [_row(period, "parse_failures", float((~group["parse_ok"].astype(bool)).sum()), n)]
    for present, name in ((has_upper, "upper"), (has_recall, "recall")):
        if present:
            failed = float(group[f"{name}_parse_ok"].astype(object).eq(False).sum())
            rows.append(_row(period, f"{name}_parse_failures", failed, n))
    return rows


def score_table(scores: pd.DataFrame) -> str:
    """The scores as a period x metric text table (the mean row last, labelled ``mean``)."""
    wide = scores.assign(
        period=scores["period"].map(lambda p: "mean" if p is None or p != p else str(int(p)))
    ).pivot(index="period", columns="metric", values="value")
    order = [p for p in wide.index if p != "mean"]
    wide = wide.loc[sorted(order, key=int) + ["mean"]]
    columns = [c for c in SCORE_ORDER if c in wide.columns]
    return wide[columns].to_string(float_format=lambda v: f"{v:.3f}")


def _frame(rows: list[dict[str, Any]], columns: list[str], nullable: Iterable[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=columns)
    for name in nullable:
        frame[name] = pd.Series([row[name] for row in rows], index=frame.index, dtype=object)
    return frame


def _row(period: Any, metric: str, value: float, n: int) -> dict[str, Any]:
    return {
        "period": None if period is None else int(period),
        "metric": metric,
        "value": float(value),
        "n": int(n),
    }


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else math.nan


def _records(frame: pd.DataFrame, kind: str) -> Iterable[dict[str, Any]]:
    missing = [name for name in _REQUIRED[kind] if name not in frame.columns]
    if missing:
        raise ValueError(f"{kind}: missing column '{missing[0]}'")
    return frame.to_dict("records")


def _loc(record: dict[str, Any], kind: str, i: int) -> str:
    """``file: line n`` for rows read by :func:`read_reply_file`, else ``kind row i``."""
    if _present(record.get("source")) and _present(record.get("line")):
        return f"{record['source']}: line {int(record['line'])}"
    return f"{kind} row {i}"


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _parse_ok(record: dict[str, Any]) -> bool:
    flag = record.get("parse_ok")
    return True if not _present(flag) else bool(flag)


def _locate(by_id: dict[str, AmemUser], record: dict[str, Any], loc: str):
    """(user, question, period) named by a reply row, or a one-line error."""
    user = by_id.get(str(record["user_id"]))
    if user is None:
        raise ValueError(f"{loc}: user_id {record['user_id']!r} is not in the data")
    j = _index(record["question_index"], len(user.questions), loc, "question_index")
    period = None
    if "period" in record:
        p = _index(record["period"], len(user.periods), loc, "period")
        period = user.periods[p]
    return user, user.questions[j], period


def _rows_of(by_id: dict[str, AmemUser], frame: pd.DataFrame, kind: str):
    """(record, loc, user, question, period) per row of ``frame``; a row naming nothing in the
    data, or naming the same reply as an earlier row, is a one-line error."""
    seen: set[tuple] = set()
    for i, record in enumerate(_records(frame, kind)):
        loc = _loc(record, kind, i)
        user, question, period = _locate(by_id, record, loc)
        if kind == "upper":
            option = _index(record["option_index"], len(question.choices), loc, "option_index")
            key = (user.id, question.index, option)
            what = f"user {user.id} question {question.index} option {option}"
        else:
            key = (user.id, period.index, question.index)
            what = f"user {user.id} period {period.index} question {question.index}"
        if key in seen:
            raise ValueError(f"{loc}: {what} repeats")
        seen.add(key)
        yield record, loc, user, question, period


def _index(value: Any, n: int, loc: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != int(value):
        raise ValueError(f"{loc}: '{name}' must be an integer, got {value!r}")
    if not 0 <= int(value) < n:
        raise ValueError(f"{loc}: '{name}' must be 0..{n - 1}, got {int(value)}")
    return int(value)


def _order(value: Any, n: int, loc: str) -> list[int]:
    """The shown order of the choices; null = data.json order."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return list(range(n))
    order = [int(v) for v in value]
    if sorted(order) != list(range(n)):
        raise ValueError(f"{loc}: 'option_order' must be a permutation of 0..{n - 1}, got {order}")
    return order


def _chosen(record: dict[str, Any], n: int, loc: str) -> int | None:
    """data.json index of the option a reply row picks through its shown order; None when the
    gateway gave up on it or it does not parse (strict: never a guess)."""
    order = _order(record.get("option_order"), n, loc)
    if not _parse_ok(record):
        return None
    reply = record["reply"]
    try:
        return order[parse_answer(reply if isinstance(reply, str) else "", n) - 1]
    except UnparseableReply:
        return None


def is_option_order(value: Any) -> bool:
    """Whether a reply's ``option_order`` is well formed: absent (None) or a list of integers."""
    if value is None:
        return True
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def chosen_option(record: dict[str, Any], n: int, kind: str) -> int | None:
    """The data.json index a reply row picks, as the scorer reads it: an upper-bound row by its
    reply and shown order alone (the workflow passes the scorer no ``parse_ok`` for those), a
    checkpoint row also honouring ``parse_ok``; None when it does not parse."""
    if kind == "upper":
        record = {k: v for k, v in record.items() if k != "parse_ok"}
    return _chosen(record, n, kind)


def _upper_scores(by_id, upper: pd.DataFrame) -> dict[tuple[str, int, int], tuple[float, bool]]:
    """(user, question, option) -> (1.0 if the model picked that option's state, parse_ok)."""
    out = {}
    for record, loc, user, question, _ in _rows_of(by_id, upper, "upper"):
        k = int(record["option_index"])
        chosen = _chosen(record, len(question.choices), loc)
        right = chosen is not None and question.choices[chosen].state == question.choices[k].state
        out[(user.id, question.index, k)] = (float(right), chosen is not None)
    return out


def _upper_of(scores, user, question, period, gold: int, reference: bool):
    """The upper bound of one (user, period, question): per question, or the reference's lookup."""
    if not reference:
        key = (user.id, question.index, gold)
        if key not in scores:
            raise ValueError(
                f"upper: no reply for user {user.id} question {question.index} option {gold} "
                f"(the true state at period {period.index})"
            )
        return scores[key]
    by_state: dict[tuple[str, ...], tuple[float, bool]] = {}
    for other in user.questions:  # the reference's dict: state tuple -> score, last one wins
        for k, choice in enumerate(other.choices):
            if (user.id, other.index, k) in scores:
                by_state[tuple(choice.state)] = scores[(user.id, other.index, k)]
    truth = tuple(true_state(question, period))
    if truth not in by_state:
        raise ValueError(
            f"upper: no reply for user {user.id} for any option with state {list(truth)} "
            f"(question {question.index}, period {period.index})"
        )
    return by_state[truth]


def _recall_scores(by_id, recall: pd.DataFrame) -> dict[tuple[str, int, int], tuple[list, bool]]:
    """(user, period, question) -> (1.0/0.0 per required type recalled right then, parse_ok)."""
    out = {}
    for record, _, user, question, period in _rows_of(by_id, recall, "recall"):
        reply = record["reply"]
        values: dict[str, str] = {}
        ok = _parse_ok(record)
        if ok:
            try:
                values = parse_recall(reply if isinstance(reply, str) else "")
            except UnparseableReply:
                ok = False
        scores = [float(values.get(t) == period.state[t]) for t in question.required_info]
        out[(user.id, period.index, question.index)] = (scores, ok)
    return out


def write_position(user: AmemUser, info_type: str, period: int) -> int:
    """The checkpoint right after ``info_type`` last changed, at or before ``period`` (0 at first).

    The reference reads it from each period's ``updates``; the state sequence says the same on
    any consistent file, and it is what the answers are scored against.
    """
    position = 0
    for p in range(1, period + 1):
        if user.periods[p].state.get(info_type) != user.periods[p - 1].state.get(info_type):
            position = p
    return position


def _diagnose(recalled, user, question, period, correct: bool) -> dict[str, Any]:
    """Recall outcome of one answer and its share of write / read / utilization failure."""
    key = (user.id, period.index, question.index)
    if key not in recalled:
        raise ValueError(
            f"recall: no reply for user {user.id} period {period.index} question {question.index}"
        )
    now, ok = recalled[key]
    out = {
        "recall_correct": sum(now) / len(now),
        "recall_parse_ok": ok,
        "write_failure": 0.0,
        "read_failure": 0.0,
        "utilization_failure": 0.0,
        "failure": "none",
    }
    if correct:
        return out
    write = read = 0
    for i, info in enumerate(question.required_info):
        if now[i] >= 0.5:
            continue
        at = write_position(user, info, period.index)
        then_key = (user.id, at, question.index)
        if then_key not in recalled:
            raise ValueError(
                f"recall: no reply for user {user.id} period {at} question {question.index} "
                f"(where {info!r} was last written, needed at period {period.index})"
            )
        if recalled[then_key][0][i] < 0.5:
            write += 1
        else:
            read += 1
    if write + read == 0:
        out.update(utilization_failure=1.0, failure="utilization")
    else:
        label = "+".join(name for name, count in (("write", write), ("read", read)) if count)
        out.update(
            write_failure=write / (write + read), read_failure=read / (write + read), failure=label
        )
    return out


def read_reply_file(path: str | Path, kind: str) -> pd.DataFrame:
    """A JSONL file of ``kind`` replies / upper / recall as a frame; bad lines are one-line errors.

    Types only; which users, periods and questions exist is checked by :func:`score_replies`.
    """
    path = Path(path)
    ints = [name for name in _REQUIRED[kind] if name not in ("user_id", "reply")]
    rows = []
    for number, record in iter_jsonl(path):
        loc = f"{path}: line {number}"
        if not isinstance(record, dict):
            raise DataError(f"{loc}: expected an object")
        for name in _REQUIRED[kind]:
            if name not in record or record[name] is None:
                raise DataError(f"{loc}: missing field '{name}'")
        if not isinstance(record["user_id"], str):
            raise DataError(f"{loc}: 'user_id' must be a string, got {record['user_id']!r:.60}")
        if not isinstance(record["reply"], str):
            raise DataError(f"{loc}: 'reply' must be a string, got {record['reply']!r:.60}")
        for name in ints:
            value = record[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise DataError(f"{loc}: '{name}' must be an integer >= 0, got {value!r:.60}")
        order = record.get("option_order")
        if not is_option_order(order):
            raise DataError(f"{loc}: 'option_order' must be a list of integers, got {order!r:.60}")
        if record.get("parse_ok") is not None and not isinstance(record["parse_ok"], bool):
            raise DataError(
                f"{loc}: 'parse_ok' must be true or false, got {record['parse_ok']!r:.60}"
            )
        rows.append(
            {
                **{name: record[name] for name in _REQUIRED[kind]},
                "option_order": order,
                "parse_ok": record.get("parse_ok"),
                "source": str(path),
                "line": number,
            }
        )
    if not rows:
        raise DataError(f"{path}: no records")
    return pd.DataFrame(rows)
