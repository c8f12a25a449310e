"""A run's answers in the formats the benchmarks' official scorers read (``mnemoflow export``).

One file per (benchmark, system, protocol, step), named ``{benchmark}.{system}.{protocol}.step{k}``
and a suffix per format:

- ``longmemeval`` -> ``.hypotheses.jsonl``: ``{question_id, hypothesis}`` per line, what the
  official ``evaluate_qa.py`` reads; beside it ``.retrievals.jsonl``, the memory's ranking of
  every answered question as LongMemEval's retrieval logs hold it
  (``{question_id, retrieval_results: {ranked_items: [{corpus_id}]}}``, an empty list where the
  memory returned nothing), which ``score --retrievals`` reads;
- ``locomo`` -> ``.samples.json``: the samples JSON given as ``--data`` (the samples the run
  answered), each question of ``qa`` with ``<key>_prediction`` (the answer) and
  ``<key>_prediction_context`` (its ranked dia_ids, which ``evaluation.py`` reads for recall;
  an empty list where the memory returned nothing, which counts recall 0 as in the run), as
  LoCoMo's ``task_eval`` writes and reads them; ``<key>`` is the system name;
- ``memorybench`` -> ``.predict.jsonl``: ``{dataset, test_idx, response}`` per line;
- ``amemgym`` -> ``.eval-output.json``: per user id the reference's eval-output for periods
  0..k: ``overall_results`` ([period][question] result records), ``overall_metrics``
  (``{"accuracy": [period][question]}``) and the upper bound's ``utilization_results``
  ([question][option], that user's slice of the reference's file); with recall probes,
  ``recall_results`` ([period][question] ``{"raw_response"}``, null where none was asked:
  mnemoflow's own field, the reference has no probe), which the failure diagnosis reads.

Each is read back by ``mnemoflow score`` (LoCoMo samples and AMemGym eval-output included), and
every metric is the run's own, empty retrievals included (``tests/test_export.py``). Logic
only: the command is ``mnemoflow/commands/export.py``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import AmemUser, gold_choice, read_environment
from mnemoflow.data.tables import as_list, read_table, write_atomic_text
from mnemoflow.errors import ConfigError
from mnemoflow.eval.amemgym.amemgym_score import chosen_option, is_option_order, score_replies
from mnemoflow.layout import ENVIRONMENT, PREPARED, RUN_STEP, export_name, parse, under

FORMATS = ("longmemeval", "locomo", "memorybench", "amemgym")
SUFFIX = {
    "longmemeval": ".hypotheses.jsonl",
    "locomo": ".samples.json",
    "memorybench": ".predict.jsonl",
    "amemgym": ".eval-output.json",
}
RETRIEVALS_SUFFIX = ".retrievals.jsonl"


@dataclass(frozen=True)
class Run:
    """One (benchmark, system, protocol, step) of a results directory and its answer files."""

    benchmark: str
    system: str
    protocol: str
    step: int
    files: tuple[Path, ...]

    @property
    def keys(self) -> dict[str, Any]:
        """The run keys (the layout's)."""
        return {"benchmark": self.benchmark, "system": self.system, "protocol": self.protocol,
                "step": self.step}  # fmt: skip

    @property
    def name(self) -> str:
        return export_name(self.keys)


def loader_of(results: Path, benchmark: str) -> str | None:
    """The loader a benchmark's prepared tables came from (``prepared/data_version.json``'s
    ``loader``; in results prepared before it recorded one, the questions' ``benchmark`` column,
    which then held the loader's name), or ``amemgym`` for a benchmark with checkpoint replies;
    None when neither is there."""
    version = under(results, PREPARED, {"benchmark": benchmark}) / "data_version.json"
    if version.is_file():
        loader = json.loads(version.read_text(encoding="utf-8")).get("loader")
        if loader:
            return str(loader)
    prepared = under(results, PREPARED, {"benchmark": benchmark}) / "questions.parquet"
    if prepared.exists():
        names = read_table(prepared, "questions")["benchmark"].unique()
        return str(names[0]) if len(names) else None
    if any((results / benchmark).glob("*/*/step*/shard*/checkpoint_replies.parquet")):
        return "amemgym"
    return None


def find_runs(results: Path, fmt: str, benchmarks: list[str] | None = None) -> list[Run]:
    """Every run under ``results`` whose benchmark's loader is ``fmt`` (only ``benchmarks`` when
    given), one per (benchmark, system, protocol, step), in that order."""
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    if not results.is_dir():
        raise ConfigError(f"{results} is not a directory")
    names = sorted(p.name for p in results.iterdir() if p.is_dir())
    if benchmarks:
        missing = [b for b in benchmarks if b not in names]
        if missing:
            raise ConfigError(f"{results} has no benchmark {missing[0]!r}")
        names = [b for b in names if b in benchmarks]
    runs: dict[tuple, list[Path]] = {}
    pattern = "*/*/step*/shard*/checkpoint_replies.parquet" if fmt == "amemgym" else None
    for benchmark in names:
        loader = loader_of(results, benchmark)
        if loader != fmt:
            if benchmarks and loader is not None:
                raise ConfigError(f"benchmark {benchmark!r} was loaded by {loader!r}, not {fmt!r}")
            continue
        if pattern:
            for path in (results / benchmark).glob(pattern):
                keys = parse(path.as_posix())
                key = (benchmark, keys["system"], keys["protocol"], keys["step"])
                runs.setdefault(key, []).append(path)
            continue
        for path in (results / benchmark).glob("*/*/step*/**/answers.parquet"):
            for key in _run_keys(path):
                runs.setdefault(key, []).append(path)
    return [Run(*key, files=tuple(sorted(paths))) for key, paths in sorted(runs.items())]


def _run_keys(path: Path) -> list[tuple]:
    frame = read_table(path, "answers")
    keys = frame[["benchmark", "system", "protocol", "step"]].drop_duplicates()
    return [(b, s, p, int(k)) for b, s, p, k in keys.itertuples(index=False)]


def answers_of(run: Run) -> pd.DataFrame:
    """The run's answers (every shard), one row per question."""
    frame = pd.concat([read_table(p, "answers") for p in run.files], ignore_index=True)
    mine = (frame["system"] == run.system) & (frame["protocol"] == run.protocol)
    frame = frame[mine & (frame["step"] == run.step)].reset_index(drop=True)
    repeated = frame["question_id"][frame["question_id"].duplicated()]
    if len(repeated):
        raise ConfigError(
            f"{run.files[0].parent}: question_id {repeated.iloc[0]!r} is answered twice "
            f"in run {run.name}"
        )
    return frame


# ---- LongMemEval ------------------------------------------------------------------------------


def longmemeval_lines(answers: pd.DataFrame) -> list[dict[str, str]]:
    """``{question_id, hypothesis}`` per answer, in question order."""
    return [
        {"question_id": str(r["question_id"]), "hypothesis": str(r["response"])}
        for r in answers.sort_values("question_id", kind="stable").to_dict("records")
    ]


def longmemeval_retrievals(answers: pd.DataFrame) -> list[dict[str, Any]]:
    """The memory's ranking per answer in LongMemEval's retrieval-log shape, in question order
    (``ranked_items`` empty where it returned nothing: recall 0, as the run counted it)."""
    return [
        {
            "question_id": str(r["question_id"]),
            "retrieval_results": {
                "ranked_items": [{"corpus_id": str(i)} for i in as_list(r["ranked_ids"])]
            },
        }
        for r in answers.sort_values("question_id", kind="stable").to_dict("records")
    ]


# ---- LoCoMo -----------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """A reference-format JSON file's content; an unreadable file is a one-line error."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file: {exc}") from None


def _object(record: Any, loc: str, fields: tuple[str, ...]) -> None:
    """``record`` must be an object with every one of ``fields``; else a one-line error at
    ``loc``."""
    if not isinstance(record, dict):
        raise ConfigError(f"{loc}: expected an object")
    for field in fields:
        if field not in record:
            raise ConfigError(f"{loc}: missing field '{field}'")


def read_samples(path: Path) -> list[dict[str, Any]]:
    """LoCoMo's samples JSON (a list of ``{sample_id, qa, ...}``); one-line errors."""
    samples = read_json(path)
    if not isinstance(samples, list):
        raise ConfigError(f"{path}: expected a list of LoCoMo samples")
    for i, sample in enumerate(samples):
        _object(sample, f"{path}: record {i}", ("sample_id", "qa"))
        if not isinstance(sample["qa"], list):
            raise ConfigError(f"{path}: record {i} ({sample['sample_id']}): 'qa' must be a list")
    return samples


def locomo_samples(
    samples: list[dict[str, Any]], answers: pd.DataFrame, key: str, source: Path
) -> tuple[list[dict[str, Any]], int]:
    """(the samples the run answered, each question with ``<key>_prediction`` and
    ``<key>_prediction_context``, empty where the memory returned nothing, as the run scored it;
    how many of their questions have no answer). Question ids are ``{sample_id}_q{index}``, as
    the LoCoMo loader writes them."""
    by_id = {str(r["question_id"]): r for r in answers.to_dict("records")}
    known: set[str] = set()
    out, unanswered = [], 0
    for sample in samples:
        ids = [f"{sample['sample_id']}_q{i}" for i in range(len(sample["qa"]))]
        known.update(ids)
        if not any(qid in by_id for qid in ids):
            continue
        sample = {**sample, "qa": [dict(qa) for qa in sample["qa"]]}
        for qid, qa in zip(ids, sample["qa"], strict=True):
            answer = by_id.get(qid)
            if answer is None:
                unanswered += 1
                continue
            qa[f"{key}_prediction"] = str(answer["response"])
            qa[f"{key}_prediction_context"] = [str(i) for i in as_list(answer["ranked_ids"])]
        out.append(sample)
    stray = sorted(set(by_id) - known)
    if stray:
        raise ConfigError(f"question_id {stray[0]!r} of the run is not in {source}")
    return out, unanswered


# ---- MemoryBench ------------------------------------------------------------------------------


def memorybench_lines(
    answers: pd.DataFrame, questions: pd.DataFrame, source: Path | str = "questions"
) -> list[dict[str, Any]]:
    """``{dataset, test_idx, response}`` per answer, in (dataset, test_idx) order; ``source``
    names the questions' file in errors."""
    by_id = {str(q["question_id"]): q for q in questions.to_dict("records")}
    lines = []
    for answer in answers.to_dict("records"):
        qid = str(answer["question_id"])
        if qid not in by_id:
            raise ConfigError(f"{source}: no question {qid!r} (answered in the run)")
        question = by_id[qid]
        meta = json.loads(question["meta"]) if question["meta"] else {}
        if "test_idx" not in meta:
            raise ConfigError(f"{source}: question {qid}: missing field 'meta.test_idx'")
        lines.append(
            {
                "dataset": str(question["dataset"]),
                "test_idx": int(meta["test_idx"]),
                "response": str(answer["response"]),
            }
        )
    return sorted(lines, key=lambda line: (line["dataset"], line["test_idx"]))


# ---- AMemGym ----------------------------------------------------------------------------------


def _choice_index(value: Any) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def _order(value: Any, n: int) -> list[int]:
    order = as_list(value)
    return [int(v) for v in order] if len(order) else list(range(n))


def _usage(record: dict[str, Any]) -> dict[str, int]:
    return {
        "input_tokens": int(record.get("tokens_in") or 0),
        "output_tokens": int(record.get("tokens_out") or 0),
    }


def _result(question, gold: int, chosen: int | None, record: dict[str, Any]) -> dict[str, Any]:
    """One result record with the reference's fields (0-based ``answer``, 1-based ``response``
    in data.json order; a reply that did not parse has ``json_error`` true and no response, where
    the reference would score a random option), plus ``option_order``: the data.json indices in
    the order the model saw them, needed to re-parse ``raw_response``."""
    n = len(question.choices)
    picked = question.choices[chosen] if chosen is not None else None
    return {
        "query": question.query,
        "answer": gold,
        "answer_state": list(question.choices[gold].state),
        "answer_choice": question.choices[gold].answer,
        "raw_response": str(record["reply"]),
        "response": None if chosen is None else chosen + 1,
        "response_state": None if picked is None else list(picked.state),
        "response_choice": None if picked is None else picked.answer,
        "json_error": chosen is None,
        "llm_usage_statistics": _usage(record),
        "scores": {
            "accuracy": float(picked is not None and picked.state == question.choices[gold].state)
        },
        "option_order": _order(record.get("option_order"), n),
    }


def amemgym_eval_output(
    users: list[AmemUser],
    replies: pd.DataFrame,
    upper: pd.DataFrame | None,
    recall: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Per user id: ``overall_results`` [period][question] (null where the run has no reply),
    ``overall_metrics`` {"accuracy": [period][question]}, and with upper-bound replies
    ``utilization_results`` [question][option] (the reference's per-user slice of
    ``utilization_results.json``; ``answer`` there is the 1-based option told)."""
    scored, _ = score_replies(users, replies)
    chosen = {
        (r["user_id"], int(r["period"]), int(r["question_index"])): _choice_index(
            r["chosen_option"]
        )
        for r in scored.to_dict("records")
    }
    by_reply = {
        (str(r["user_id"]), int(r["period"]), int(r["question_index"])): r
        for r in replies.to_dict("records")
    }
    periods = int(replies["period"].max()) + 1 if len(replies) else 0
    out: dict[str, Any] = {}
    for user in users:
        results, accuracy = [], []
        for p in range(periods):
            row, values = [], []
            for question in user.questions:
                key = (user.id, p, question.index)
                if key not in by_reply:
                    row.append(None)
                    values.append(None)
                    continue
                gold = gold_choice(question, user.periods[p])
                result = _result(question, gold, chosen[key], by_reply[key])
                row.append(result)
                values.append(result["scores"]["accuracy"])
            results.append(row)
            accuracy.append(values)
        if not any(r is not None for row in results for r in row):
            continue
        entry: dict[str, Any] = {
            "overall_results": results,
            "overall_metrics": {"accuracy": accuracy},
        }
        if upper is not None:
            entry["utilization_results"] = _utilization(user, upper)
        if recall is not None and len(recall):
            entry["recall_results"] = _recall_results(user, recall, periods)
        out[user.id] = entry
    return out


def _recall_results(user: AmemUser, recall: pd.DataFrame, periods: int) -> list[list]:
    """[period][question] ``{"raw_response"}`` of the user's recall probes (null: none)."""
    mine = recall[recall["user_id"].astype(str) == user.id]
    by_key = {
        (int(r["period"]), int(r["question_index"])): str(r["reply"])
        for r in mine.to_dict("records")
    }
    return [
        [
            {"raw_response": by_key[(p, q.index)]} if (p, q.index) in by_key else None
            for q in user.questions
        ]
        for p in range(periods)
    ]


def _utilization(user: AmemUser, upper: pd.DataFrame) -> list[list[dict[str, Any] | None]]:
    """[question][option] result records of the upper-bound replies (the option's state told)."""
    mine = upper[upper["user_id"] == user.id]
    by_key = {
        (int(r["question_index"]), int(r["option_index"])): r for r in mine.to_dict("records")
    }
    out = []
    for question in user.questions:
        row = []
        for k in range(len(question.choices)):
            record = by_key.get((question.index, k))
            if record is None:
                row.append(None)
                continue
            picked = chosen_option(record, len(question.choices), "upper")
            result = _result(question, k, picked, record)
            result["answer"] = k + 1  # the reference's utilization records: 1-based option told
            row.append(result)
        out.append(row)
    return out


def amemgym_data(results: Path, benchmark: str, data: Path | None) -> Path:
    """The run's data.json: ``--data`` when given, else the generated environment."""
    if data is not None:
        return data
    generated = under(results, ENVIRONMENT, {"benchmark": benchmark})
    if not generated.exists():
        raise ConfigError(f"{benchmark} has no generated {generated}; pass its data.json as --data")
    return generated


def amemgym_replies(results: Path, run: Run, name: str = "checkpoint_replies") -> pd.DataFrame:
    """Checkpoint replies (or ``name``: recall replies, an empty frame when there are none) of
    periods 0..step of the run (step k's scores are over them)."""
    frames = []
    for step in range(run.step + 1):
        folder = under(results, RUN_STEP, {**run.keys, "step": step})
        for path in sorted(folder.glob(f"shard*/{name}.parquet")):
            frames.append(pd.read_parquet(path))
    if not frames and name == "checkpoint_replies":
        raise ConfigError(f"run {run.name} has no checkpoint replies")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---- writing ----------------------------------------------------------------------------------


def _jsonl(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


@dataclass(frozen=True)
class Written:
    run: Run
    path: Path
    items: int
    note: str = ""
    #: files written beside ``path`` (LongMemEval's retrieval log)
    also: tuple[Path, ...] = ()


def export(results: Path, fmt: str, out: Path, *, data: Path | None = None,
           benchmarks: list[str] | None = None) -> list[Written]:  # fmt: skip
    """Write one file per run of ``fmt`` under ``results`` into ``out``; what was written."""
    runs = find_runs(results, fmt, benchmarks)
    if not runs:
        raise ConfigError(f"no {fmt} runs under {results}")
    if fmt == "locomo" and data is None:
        raise ConfigError("--format locomo needs --data (the samples JSON, locomo10.json)")
    samples = read_samples(data) if fmt == "locomo" else None
    written = []
    for run in runs:
        path = out / f"{run.name}{SUFFIX[fmt]}"
        note = ""
        also: dict[Path, str] = {}
        if fmt == "amemgym":
            users = read_environment(amemgym_data(results, run.benchmark, data))
            replies = amemgym_replies(results, run)
            upper_file = results / run.benchmark / "upper_bound.parquet"
            upper = pd.read_parquet(upper_file) if upper_file.exists() else None
            recall = amemgym_replies(results, run, "recall_replies")
            content = amemgym_eval_output(users, replies, upper, recall)
            text = json.dumps(content, ensure_ascii=False, indent=1) + "\n"
            items = len(replies)
        else:
            answers = answers_of(run)
            items = len(answers)
            if fmt == "longmemeval":
                text = _jsonl(longmemeval_lines(answers))
                retrievals = out / f"{run.name}{RETRIEVALS_SUFFIX}"
                also[retrievals] = _jsonl(longmemeval_retrievals(answers))
            elif fmt == "memorybench":
                prepared = (
                    under(results, PREPARED, {"benchmark": run.benchmark}) / "questions.parquet"
                )
                questions = read_table(prepared, "questions")
                text = _jsonl(memorybench_lines(answers, questions, prepared))
            else:
                chosen, unanswered = locomo_samples(samples, answers, run.system, data)
                text = json.dumps(chosen, ensure_ascii=False, indent=1) + "\n"
                if unanswered:
                    note = (
                        f"{unanswered} questions of the exported samples have no answer "
                        "(the official script needs one for each)"
                    )
        out.mkdir(parents=True, exist_ok=True)
        write_atomic_text(path, text)
        for extra, content in also.items():
            write_atomic_text(extra, content)
        written.append(Written(run, path, items, note, tuple(also)))
    return written


# ---- reading the official formats back (``mnemoflow score``) ----------------------------------


def is_locomo_samples(path: Path) -> bool:
    """Whether a predictions file is LoCoMo's samples JSON (a list of objects with ``qa``)."""
    text = Path(path).read_text(encoding="utf-8").lstrip()
    if not text.startswith("["):
        return False
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        return False
    return bool(items) and isinstance(items[0], dict) and "qa" in items[0]


def prediction_key(samples: list[dict[str, Any]], path: Path) -> str:
    """The one ``<key>`` with ``<key>_prediction`` fields in the samples; an error naming the
    candidates when there are none or several (then ``--prediction-key`` says which)."""
    keys = sorted(
        {
            name.removesuffix("_prediction")
            for sample in samples
            for qa in sample["qa"]
            if isinstance(qa, dict)
            for name in qa
            if name.endswith("_prediction")
        }
    )
    if len(keys) != 1:
        found = ", ".join(keys) if keys else "none"
        raise ConfigError(
            f"{path}: expected one '<model>_prediction' field per question, found {found}; "
            "choose one with --prediction-key"
        )
    return keys[0]


def read_locomo_samples(
    path: Path, known_ids: set[str] | None = None, key: str | None = None
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """(question_id + hypothesis, question_id -> ranked dia_ids) from LoCoMo's samples JSON with
    ``<key>_prediction`` (and optional ``<key>_prediction_context``) beside each question.

    A question without the field is not scored (the official script would stop there); ids are
    ``{sample_id}_q{index}``; a bad field is a one-line error naming file, sample and question.
    """
    samples = read_samples(path)
    key = key or prediction_key(samples, path)
    field, context = f"{key}_prediction", f"{key}_prediction_context"
    rows, rankings = [], {}
    for i, sample in enumerate(samples):
        for j, qa in enumerate(sample["qa"]):
            where = f"{path}: record {i} ({sample['sample_id']}) qa[{j}]"
            if not isinstance(qa, dict):
                raise ConfigError(f"{where}: expected an object")
            if field not in qa:
                continue
            qid = f"{sample['sample_id']}_q{j}"
            if known_ids is not None and qid not in known_ids:
                raise ConfigError(f"{where}: question {qid!r} is not in the benchmark data")
            if not isinstance(qa[field], str):
                raise ConfigError(f"{where}: '{field}' must be a string, got {qa[field]!r:.60}")
            rows.append({"question_id": qid, "hypothesis": qa[field]})
            if context in qa:
                ranked = qa[context]
                if not isinstance(ranked, list) or not all(isinstance(v, str) for v in ranked):
                    raise ConfigError(f"{where}: '{context}' must be a list of dia_ids")
                rankings[qid] = list(ranked)
    if not rows:
        raise ConfigError(f"{path}: no question has a '{field}' field")
    return pd.DataFrame(rows, columns=["question_id", "hypothesis"]), rankings


def read_eval_output(
    path: Path,
) -> tuple[pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]:
    """(checkpoint replies, upper-bound replies or None, recall replies or None) from an AMemGym
    eval-output JSON as :func:`amemgym_eval_output` writes it, in the frames ``score_replies``
    reads: each result's ``raw_response`` re-parsed through its ``option_order`` (``json_error``
    true = a reply the run already gave up on); one-line errors naming file, user, period,
    question and field."""
    content = read_json(path)
    if not isinstance(content, dict) or not content:
        raise ConfigError(f"{path}: expected an object of user ids")
    return eval_output_frames({u: (e, f"{path}: user {u}") for u, e in content.items()}, path)


def eval_output_frames(
    entries: dict[str, tuple[Any, str]], path: Path
) -> tuple[pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]:
    """The frames of :func:`read_eval_output` from user id -> (its eval-output entry, where it
    was read for errors): a single file's users, or the reference's one folder per user."""
    replies, upper, recall = [], [], []
    for user_id, (entry, where) in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("overall_results"), list):
            raise ConfigError(f"{where}: missing field 'overall_results'")
        for p, q, result, loc in _grid(entry, "overall_results", where):
            record = _reply_record(result, loc)
            replies.append({"user_id": user_id, "period": p, "question_index": q, **record})
        for q, k, result, loc in _grid(entry, "utilization_results", where):
            record = _reply_record(result, loc)
            record["parse_ok"] = None  # re-parsed, as the workflow scores upper replies
            upper.append({"user_id": user_id, "question_index": q, "option_index": k, **record})
        for p, q, result, loc in _grid(entry, "recall_results", where):
            if not isinstance(result, dict) or not isinstance(result.get("raw_response"), str):
                raise ConfigError(f"{loc}: missing field 'raw_response'")
            reply = result["raw_response"]
            recall.append({"user_id": user_id, "period": p, "question_index": q, "reply": reply})
    if not replies:
        raise ConfigError(f"{path}: no results")
    return (
        pd.DataFrame(replies),
        pd.DataFrame(upper) if upper else None,
        pd.DataFrame(recall) if recall else None,
    )


def _grid(entry: dict[str, Any], name: str, where: str):
    """(i, j, result, its place for errors) of every non-null result of a user's ``name``
    ([i][j] lists; an absent field has none)."""
    rows = entry.get(name)
    if rows is None:
        return
    if not isinstance(rows, list):
        raise ConfigError(f"{where}: '{name}' must be a list")
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise ConfigError(f"{where} {name}[{i}]: expected a list")
        for j, result in enumerate(row):
            if result is not None:
                yield i, j, result, f"{where} {name}[{i}][{j}]"


def _reply_record(result: Any, loc: str) -> dict[str, Any]:
    _object(result, loc, ("raw_response", "json_error"))
    if not isinstance(result["raw_response"], str):
        raise ConfigError(f"{loc}: 'raw_response' must be a string")
    if not isinstance(result["json_error"], bool):
        raise ConfigError(f"{loc}: 'json_error' must be true or false")
    order = result.get("option_order")
    if not is_option_order(order):
        raise ConfigError(f"{loc}: 'option_order' must be a list of integers")
    return {
        "reply": result["raw_response"],
        "option_order": order,
        "parse_ok": not result["json_error"],
    }
