"""An AMemGym eval-output read as an imported system's checkpoint replies (interactive protocol).

Two shapes are read, both the reference's per-(period, question) result records
(``raw_response``, ``json_error``; ``option_order`` where the options were shown shuffled, else
the data.json order):

- a file: what ``mnemoflow export --format amemgym`` writes, an object of user id ->
  ``{overall_results, overall_metrics, utilization_results?, recall_results?}``;
- a folder: the reference's own output (``amemgym.eval.overall`` writes
  ``<output_dir>/<agent name>/<user id>/overall_results.json`` and ``overall_metrics.json``), one
  sub-folder per user id; the folder is pinned by :func:`output_sha256` over the files read.

The interactive job of an imported system reads period k's replies of its users from here
instead of conversing and asking the agent (:mod:`mnemoflow.protocols.interactive`), and the
workflow scores them against the benchmark's environment like any run. A reply is re-parsed
strictly as the workflow parses its own (``json_error`` true is a parse failure counted wrong,
where the reference scored a random option), so :func:`strict_accuracy` states how far that moves
the file's own ``overall_metrics``.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import AmemUser
from mnemoflow.data.errata import file_sha256
from mnemoflow.errors import ConfigError
from mnemoflow.eval.amemgym.amemgym_replies import parse_answer
from mnemoflow.eval.export import eval_output_frames, read_eval_output, read_json
from mnemoflow.llm.types import UnparseableReply

FORMAT = "amemgym"
#: The files of one user's folder in the reference's output.
RESULTS, METRICS = "overall_results.json", "overall_metrics.json"


def user_folders(folder: Path) -> dict[str, Path]:
    """user id -> its ``overall_results.json`` in a reference output folder (sorted by id)."""
    found = {p.parent.name: p for p in sorted(Path(folder).glob(f"*/{RESULTS}"))}
    if not found:
        raise ConfigError(f"{folder}: no <user id>/{RESULTS} (is it an AMemGym eval-output?)")
    return found


def output_sha256(path: Path) -> str:
    """A file's sha256; a reference folder's: the sha256 of ``<user id>/overall_results.json
    <its sha256>`` lines of every user, sorted, so any change to what is read changes it."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    lines = "".join(f"{u}/{RESULTS} {file_sha256(p)}\n" for u, p in user_folders(path).items())
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def checked_output(path: Any, sha256: Any, where: str) -> Path:
    """``path`` (file or folder) when it exists and has ``sha256``; else one line."""
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}: missing field 'path'")
    if not Path(path).exists():
        raise ConfigError(f"{where}.path: no such file or folder {path}")
    actual = output_sha256(Path(path))
    if sha256 != actual:
        raise ConfigError(f"{where}.sha256: {path} has sha256 {actual}, the config says {sha256}")
    return Path(path)


@dataclass(frozen=True)
class EvalOutput:
    """The checkpoint replies (``user_id, period, question_index, reply, option_order,
    parse_ok``) and recall replies (or None) of an eval-output, and where it was read."""

    replies: pd.DataFrame
    recall: pd.DataFrame | None
    path: Path

    def of_users(self, ids: set[str]) -> EvalOutput:
        """The replies of the users ``ids`` only (a shard's)."""
        recall = self.recall
        if recall is not None:
            recall = recall[recall.user_id.astype(str).isin(ids)]
        replies = self.replies[self.replies.user_id.astype(str).isin(ids)]
        return EvalOutput(replies, recall, self.path)


def read_output(path: Path) -> EvalOutput:
    """An eval-output file or reference folder; one-line errors naming file, user, period,
    question and field."""
    path = Path(path)
    if path.is_file():
        replies, _, recall = read_eval_output(path)
        return EvalOutput(replies, recall, path)
    entries = {}
    for user, results in user_folders(path).items():
        content = read_json(results)
        if not isinstance(content, list):
            raise ConfigError(f"{results}: expected a list of periods, each a list of results")
        entries[user] = ({"overall_results": content}, str(results))
    replies, _, recall = eval_output_frames(entries, path)
    return EvalOutput(replies, recall, path)


def checked_against(output: EvalOutput, users: list[AmemUser]) -> EvalOutput:
    """``output`` when each of its replies names a user, period and question of the
    environment; else one line naming the file, the record (``overall_results[period]
    [question]``) and what does not match."""
    by_id = {u.id: u for u in users}
    folder = output.path.is_dir()
    for row in output.replies.itertuples():
        record = f"overall_results[{row.period}][{row.question_index}]"
        if folder:
            where = f"{output.path / str(row.user_id) / RESULTS} {record}"
        else:
            where = f"{output.path}: user {row.user_id} {record}"
        user = by_id.get(str(row.user_id))
        if user is None:
            raise ConfigError(f"{where}: user {row.user_id} is not in the benchmark's environment")
        if row.period >= len(user.periods):
            raise ConfigError(f"{where}: user {user.id} has {len(user.periods)} periods")
        if row.question_index >= len(user.questions):
            raise ConfigError(f"{where}: user {user.id} has {len(user.questions)} questions")
    return output


def period_replies(
    output: EvalOutput, user: str, period: int, questions: int
) -> list[dict[str, Any]]:
    """The checkpoint reply records of ``user`` at ``period``, one per question index
    ``0..questions-1``: a question the output has no reply to (a null result of an interrupted
    run, a period or user left out) is a reply that did not parse (``parse_ok`` false, empty), so
    it is scored unscored as a native run's failed reply is, never left out of the count."""
    mine = output.replies[(output.replies.user_id == user) & (output.replies.period == period)]
    found = {int(r["question_index"]): r for r in mine.to_dict("records")}
    none = {"user_id": user, "period": period, "reply": "", "option_order": None}
    return [
        found.get(q, {**none, "question_index": q, "parse_ok": False}) for q in range(questions)
    ]


def every_reply(output: EvalOutput, users: list[AmemUser]) -> pd.DataFrame:
    """The checkpoint replies of every period and question of ``users``
    (:func:`period_replies`: one the output lacks is an empty reply that did not parse)."""
    rows = [
        row
        for user in users
        for period in range(len(user.periods))
        for row in period_replies(output, user.id, period, len(user.questions))
    ]
    return pd.DataFrame(rows, columns=list(output.replies.columns))


def period_recall(output: EvalOutput, user: str, period: int) -> list[dict[str, Any]]:
    """The recall probe records of ``user`` at ``period``, where the file has them."""
    if output.recall is None:
        return []
    frame = output.recall
    mine = frame[(frame.user_id == user) & (frame.period == period)]
    return mine.sort_values("question_index").to_dict("records")


# ---- the file's own numbers, without the environment -------------------------------------------


def published_accuracy(folder: Path) -> dict[str, list[float]]:
    """user id -> its ``overall_metrics.json`` accuracy of every (period, question), flattened
    (the reference's own numbers), for the users whose folder has one."""
    out = {}
    for user, results in user_folders(folder).items():
        metrics = results.parent / METRICS
        if not metrics.is_file():
            continue
        content = read_json(metrics)
        grid = content.get("accuracy") if isinstance(content, dict) else None
        if not isinstance(grid, list) or not all(isinstance(row, list) for row in grid):
            raise ConfigError(f"{metrics}: missing field 'accuracy' ([period][question] numbers)")
        values = [v for row in grid for v in row]
        if not values or not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            raise ConfigError(f"{metrics}: field 'accuracy' must hold finite numbers")
        out[user] = [float(v) for v in values]
    return out


def strict_accuracy(folder: Path) -> dict[str, list[float]]:
    """user id -> its accuracy of every (period, question) re-read from each result's
    ``raw_response`` alone, parsed strictly (``parse_answer``; ``json_error`` and an unparseable
    reply count wrong), against the result's gold index ``answer`` (0-based, data.json order).
    Needs no environment: the check that a folder reads as its authors scored it."""
    out = {}
    for user, results in user_folders(folder).items():
        content = read_json(results)
        values = []
        if not isinstance(content, list) or not all(isinstance(row, list) for row in content):
            raise ConfigError(f"{results}: expected a list of periods, each a list of results")
        for p, row in enumerate(content):
            for q, result in enumerate(row):
                where = f"{results} overall_results[{p}][{q}]"
                if result is None:
                    continue  # not asked (an interrupted run): read as the reader skips it
                if not isinstance(result, dict) or "answer" not in result:
                    raise ConfigError(f"{where}: missing field 'answer'")
                values.append(_strictly_correct(result, where))
        out[user] = values
    return out


def pooled(values: dict[str, list[float]]) -> tuple[float, int]:
    """(mean over every user's values, their count): the reference's overall accuracy."""
    flat = [v for each in values.values() for v in each]
    return (sum(flat) / len(flat) if flat else math.nan), len(flat)


def _strictly_correct(result: dict[str, Any], where: str) -> float:
    """1.0 when the reply's option number is the gold index + 1 (the reference's folder shows
    the data.json order). The file does not say how many options there were; a number above
    their count is never the gold, so any positive bound reads the same verdict."""
    gold = result["answer"]
    if isinstance(gold, bool) or not isinstance(gold, int) or gold < 0:
        raise ConfigError(f"{where}: field 'answer' must be a 0-based option index, got {gold!r}")
    if result.get("json_error") is not False:
        return 0.0
    try:
        shown = parse_answer(str(result.get("raw_response") or ""), sys.maxsize)
    except UnparseableReply:
        return 0.0
    return float(shown - 1 == gold)
