"""Retrieval metrics: LongMemEval's recall / NDCG at session and turn level, LoCoMo evidence recall.

LongMemEval (``src/retrieval/eval_utils.py`` and ``run_retrieval.py`` of xiaowu0162/LongMemEval):

- the corpus is built from the *user* side: a turn key is a user turn ``{session_id}_{k}`` (k is
  1-based over all turns of the session), a session is relevant when one of its user turns holds
  evidence; gold = those turns / sessions;
- ``recall_any@k`` = 1 if any gold id is in the top k, ``recall_all@k`` = 1 if all are;
- ``ndcg_any@k`` with binary relevance, DCG = rel_1 + sum_{i>=2} rel_i / log2(i) (position 2 is
  *not* discounted: log2(2) = 1), ideal DCG from all relevances of the corpus sorted;
- session metrics from a turn ranking strip the turn suffix and widen k until the top k' turns
  cover k distinct sessions; NDCG then counts every turn position whose session is gold (so two
  turns of one gold session both count) and the ideal is every user turn of the gold sessions;
- abstention questions (``_abs`` in the id) are left out of averages; so are questions with no
  user-side evidence turn (their gold is empty, where the official code would report
  recall_all = 1 and recall_any = 0).

Documented difference: the official turn corpus renames the non-evidence turns of an evidence
session to ``noans_...``, so such a turn does not count as retrieving its session in the
turn-to-session metrics. Here a session is retrieved when any of its user turns is: that is what a
session-level metric means. Pass ``evidence_turns_only=True`` to :func:`turn_to_session_metrics`
for the official behaviour (used when checking against an official retrieval log).

At k beyond the length of a ranking (a memory system that returned 10 items, scored at @30), the
metrics use what was retrieved; the official code always ranks the whole corpus.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from mnemoflow.data.tables import as_list

KS = (1, 3, 5, 10, 30, 50)
MEASURES = ("recall_any", "recall_all", "ndcg_any")


def dcg(relevances: Sequence[float]) -> float:
    """rel_1 + sum over i >= 2 of rel_i / log2(i) (LongMemEval's variant: rank 2 undiscounted)."""
    if not relevances:
        return 0.0
    return float(relevances[0]) + sum(
        float(rel) / math.log2(i) for i, rel in enumerate(relevances[1:], start=2)
    )


def _ndcg(relevances: Sequence[int], n_relevant: int, k: int) -> float:
    ideal = dcg([1] * min(n_relevant, k))
    return dcg(list(relevances[:k])) / ideal if ideal else 0.0


def rank_metrics(
    ranking: Sequence[str], gold: Iterable[str], ks: Sequence[int] = KS
) -> dict[str, float]:
    """recall_any@k, recall_all@k, ndcg_any@k of a ranking (ids best first) against gold ids.

    Every gold id counts as one relevant corpus item for the ideal DCG, as in the official code,
    where the gold set is drawn from the corpus.
    """
    gold = set(gold)
    relevances = [1 if item in gold else 0 for item in ranking]
    out: dict[str, float] = {}
    for k in ks:
        top = set(ranking[:k])
        out[f"recall_any@{k}"] = float(any(g in top for g in gold))
        out[f"recall_all@{k}"] = float(all(g in top for g in gold))
        out[f"ndcg_any@{k}"] = _ndcg(relevances, len(gold), k)
    return out


def strip_turn(turn_id: str) -> str:
    """``{session_id}_{k}`` -> ``session_id`` (the official ``'_'.join(id.split('_')[:-1])``)."""
    return turn_id.rsplit("_", 1)[0] if "_" in turn_id else turn_id


def turn_to_session_metrics(
    turn_ranking: Sequence[str],
    gold_sessions: Iterable[str],
    n_relevant_turns: int,
    ks: Sequence[int] = KS,
    gold_turns: Iterable[str] | None = None,
    evidence_turns_only: bool = False,
) -> dict[str, float]:
    """Session-level metrics from a ranking of user turns, widening k to k distinct sessions.

    ``n_relevant_turns`` is the number of corpus turns whose position counts as relevant (every
    user turn of the gold sessions; with ``evidence_turns_only``, the gold turns), the ideal DCG's
    relevances. ``evidence_turns_only`` reproduces the official ``noans`` relabelling: only gold
    turns count as hits for their session.
    """
    gold_sessions = set(gold_sessions)
    gold_turn_set = set(gold_turns or ())
    if evidence_turns_only:
        keys = [
            f"noans:{strip_turn(t)}"
            if strip_turn(t) in gold_sessions and t not in gold_turn_set
            else strip_turn(t)
            for t in turn_ranking
        ]
    else:
        keys = [strip_turn(t) for t in turn_ranking]
    relevances = [1 if key in gold_sessions else 0 for key in keys]
    out: dict[str, float] = {}
    for k in ks:
        effective = k
        while effective < len(keys) and len(set(keys[:effective])) < k:
            effective += 1
        top = set(keys[:effective])
        out[f"recall_any@{k}"] = float(any(g in top for g in gold_sessions))
        out[f"recall_all@{k}"] = float(all(g in top for g in gold_sessions))
        out[f"ndcg_any@{k}"] = _ndcg(relevances, n_relevant_turns, effective)
    return out


def is_abstention(question_id: str) -> bool:
    """LongMemEval marks abstention questions in the id (``_abs``), not in the type."""
    return "_abs" in str(question_id)


def _meta(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    return json.loads(raw) if raw else {}


def user_turns(sessions: pd.DataFrame) -> pd.DataFrame:
    """The distinct user turns of a sessions table (sessions shared by episodes appear once)."""
    users = sessions[sessions["role"] == "user"]
    return users.drop_duplicates("turn_id")[["session_id", "turn_id", "turn_index", "has_evidence"]]


def longmemeval_gold(
    question: dict[str, Any], users: pd.DataFrame
) -> tuple[list[str], list[str], int]:
    """(gold user turns, gold sessions, number of user turns in the gold sessions).

    Evidence is ``evidence_ids`` plus meta ``answer_turn_ids``; only user turns count (the
    official corpus holds user turns only). A session id among them stands for its user turns
    flagged ``has_evidence`` (the official ``has_answer``).
    """
    meta = _meta(question.get("meta"))
    evidence = set(as_list(question.get("evidence_ids"))) | set(
        as_list(meta.get("answer_turn_ids"))
    )
    user_ids = set(users["turn_id"])
    gold = {t for t in evidence if t in user_ids}
    flagged = users[users["session_id"].isin(evidence) & users["has_evidence"].astype(bool)]
    gold |= set(flagged["turn_id"])
    gold_turns = sorted(gold)
    gold_sessions = sorted(set(users.loc[users["turn_id"].isin(gold), "session_id"]))
    n_turns = int(users["session_id"].isin(gold_sessions).sum())
    return gold_turns, gold_sessions, n_turns


def is_session_granular(ranking: Sequence[str], users: pd.DataFrame) -> bool:
    """Did a retriever return whole sessions? (each session one contiguous block of all its turns)

    A memory's ``retrieved_ids`` are flattened source turn ids; a session-level memory gives each
    session's turns together, all of them. Used when the caller does not say the granularity.
    """
    if not ranking:
        return False
    per_session = users.groupby("session_id")["turn_id"].apply(set).to_dict()
    blocks: list[tuple[str, set[str]]] = []
    for turn in ranking:
        session = strip_turn(turn)
        if blocks and blocks[-1][0] == session:
            blocks[-1][1].add(turn)
        else:
            blocks.append((session, {turn}))
    seen = [session for session, _ in blocks]
    if len(seen) != len(set(seen)):
        return False
    return all(
        per_session.get(session) and per_session[session] <= turns and len(turns) > 1
        for session, turns in blocks
    )


def dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def longmemeval_retrieval_rows(
    questions: pd.DataFrame,
    rankings: dict[str, list[str]],
    sessions: pd.DataFrame,
    granularity: str = "auto",
    ks: Sequence[int] = KS,
    evidence_turns_only: bool = False,
) -> pd.DataFrame:
    """Per-question retrieval metrics, long form: question_id, question_type, metric, value, level.

    ``rankings`` maps a question id to ranked ids: turn ids (a turn-level retriever, or the
    flattened source ids of a memory's items) or session ids. ``granularity`` is "turn",
    "session" or "auto" (see :func:`is_session_granular`). Turn rankings give turn-level and
    session-level rows; session rankings give session-level rows only, as in the official logs.
    """
    if granularity not in ("auto", "turn", "session"):
        raise ValueError(f"granularity must be auto, turn or session, got {granularity!r}")
    users = user_turns(sessions)
    user_ids = set(users["turn_id"])
    session_ids = set(sessions["session_id"])
    rows: list[dict[str, Any]] = []
    for question in questions.to_dict("records"):
        qid = question["question_id"]
        if qid not in rankings or is_abstention(qid):
            continue
        gold_turns, gold_sessions, n_turns = longmemeval_gold(question, users)
        if not gold_turns:
            continue
        ranking = list(rankings[qid])
        kind = granularity
        if kind == "auto":
            if ranking and all(r in session_ids and r not in user_ids for r in ranking):
                kind = "session"
            else:
                kind = "session" if is_session_granular(ranking, users) else "turn"
        results: dict[str, dict[str, float]] = {}
        if kind == "session":
            order = dedupe(r if r in session_ids else strip_turn(r) for r in ranking)
            results["session"] = rank_metrics(order, gold_sessions, ks)
        else:
            turn_ranking = dedupe(r for r in ranking if r in user_ids)
            results["turn"] = rank_metrics(turn_ranking, gold_turns, ks)
            results["session"] = turn_to_session_metrics(
                turn_ranking,
                gold_sessions,
                len(gold_turns) if evidence_turns_only else n_turns,
                ks,
                gold_turns=gold_turns,
                evidence_turns_only=evidence_turns_only,
            )
        for level, metrics in results.items():
            for metric, value in metrics.items():
                rows.append(
                    {
                        "question_id": qid,
                        "question_type": question["question_type"],
                        "metric": metric,
                        "value": value,
                        "level": level,
                    }
                )
    return pd.DataFrame(rows, columns=["question_id", "question_type", "metric", "value", "level"])


def evidence_recall(evidence: Iterable[str], retrieved: Iterable[str]) -> float | None:
    """LoCoMo: share of a question's evidence dia_ids among the retrieved ids (None: no evidence).

    The official code also scores 1.0 for questions without evidence or without a retrieval; those
    are left out here instead, so the average is over questions where recall is defined.
    """
    evidence = list(dict.fromkeys(evidence))
    if not evidence:
        return None
    got = set(retrieved)
    return sum(e in got for e in evidence) / len(evidence)


def locomo_retrieval_rows(questions: pd.DataFrame, rankings: dict[str, list[str]]) -> pd.DataFrame:
    """Per-question LoCoMo evidence recall in long form (level "turn")."""
    rows = []
    for question in questions.to_dict("records"):
        qid = question["question_id"]
        if qid not in rankings:
            continue
        value = evidence_recall(as_list(question.get("evidence_ids")), rankings[qid])
        if value is None:
            continue
        rows.append(
            {
                "question_id": qid,
                "question_type": question["question_type"],
                "metric": "evidence_recall",
                "value": value,
                "level": "turn",
            }
        )
    return pd.DataFrame(rows, columns=["question_id", "question_type", "metric", "value", "level"])
