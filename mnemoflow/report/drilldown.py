"""The per-question drill-down: every question of every run, readable and filterable offline.

``report/questions.html`` (beside ``report.html``) lists the questions of one run at one step
at a time: question, gold, the answer, the memory items the reader was shown, the judge's raw
replies, the outcome (with the write / read / utilization diagnosis where there is one) and the
answer call's cost; filters by benchmark, run, step, question type, outcome and text; and opens
a question beside the same question of a second run.

Why chunks, not one page: at paper scale (LongMemEval-S: 500 questions x a dozen systems x
their retrieved turns; a synthetic run of 5,000 questions) one embedded table would be tens of
megabytes that the browser parses before showing anything. Each (run, step) is a file of its own,
``questions/<run>-s<step>.js``, loaded when it is chosen. They are scripts (``<script src>``),
not JSON fetched with ``fetch()``: Chromium blocks ``fetch`` of ``file://`` URLs, while a
script of the same folder loads, so the page works from a copied folder, with no server.

A chunk stores each memory item's text once (a list of texts per chunk) and cuts texts
(:data:`MAX_TEXT`) and item lists (:data:`MAX_ITEMS`) so that a full-context run of a long
history stays a list, not the history; the cut is shown, and the full ids are in
``answers.parquet``.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.amemgym import AmemUser
from mnemoflow.data.locomo import ADVERSARIAL_PHRASES
from mnemoflow.data.tables import read_table
from mnemoflow.layout import RUN_FILE, parse
from mnemoflow.prices import FREE_MODELS, lookup, price_table, usd

#: A question is wrong when its deciding value is below this (as
#: mnemoflow/eval/static_qa/diagnosis.py).
WRONG_BELOW = 0.5
#: The metric that decides right or wrong, the first a question has (as eval/static_qa/diagnosis.py,
#: with MemoryBench's judge score after them); otherwise the first metric by name.
DECIDING_METRICS = ("accuracy", "j", "f1", "llm_judge_score")
#: Memory items listed per answer, and characters kept of each text (question, answer, reply).
MAX_ITEMS = 20
MAX_TEXT = 2000
MAX_ITEM_TEXT = 400
#: Outcomes, in the order the filter lists them (diagnosis causes where a run has them).
OUTCOMES = (
    "correct",
    "wrong",
    "write",
    "read",
    "utilization",
    "undiagnosable",
    "unjudged",
)
RUN = ["benchmark", "system", "protocol", "step"]


def run_of_path(path: str | Path) -> dict[str, Any] | None:
    """Run keys from ``.../{benchmark}/{system}/{protocol}/step{k}[/shard{h}]/<file>``."""
    keys = parse(Path(path).as_posix())
    return None if keys is None else {name: keys[name] for name in RUN}


@dataclass
class DrillFrames:
    """What the drill-down reads (all optional; an empty frame is a run type without rows).

    ``answers`` / ``judgements`` / ``questions`` / ``sessions``: the unified tables (static QA
    and the feedback protocols); ``causes``: run keys, question_id and ``cause``
    (``write_failure`` ...) of static QA's wrong answers (``eval.static_qa.diagnosis.diagnose``);
    ``amemgym_scores`` / ``checkpoint_replies`` / ``recall_replies``: AMemGym's per-question
    rows with the run keys added; ``environments``: benchmark -> its data.json users.
    """

    answers: pd.DataFrame = field(default_factory=pd.DataFrame)
    judgements: pd.DataFrame = field(default_factory=pd.DataFrame)
    questions: pd.DataFrame = field(default_factory=pd.DataFrame)
    sessions: pd.DataFrame = field(default_factory=pd.DataFrame)
    causes: pd.DataFrame = field(default_factory=pd.DataFrame)
    amemgym_scores: pd.DataFrame = field(default_factory=pd.DataFrame)
    checkpoint_replies: pd.DataFrame = field(default_factory=pd.DataFrame)
    recall_replies: pd.DataFrame = field(default_factory=pd.DataFrame)
    environments: dict[str, list[AmemUser]] = field(default_factory=dict)


def _read(paths: Iterable[str | Path], columns: list[str] | None = None, keys: bool = False):
    """Concatenated tables; ``keys``: add the run keys from each file's path (AMemGym's rows
    carry none)."""
    frames = []
    for path in paths:
        frame = read_table(path, columns=columns)
        if keys:
            run = run_of_path(path)
            if run is None:
                raise ValueError(f"{path}: not a {RUN_FILE}: cannot tell its run")
            frame = frame.assign(**run)
        frames.append(frame)
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


_SESSION_COLUMNS = ["benchmark", "session_id", "turn_id", "turn_index", "role", "speaker"]


def read_frames(
    *,
    answers: Iterable[str | Path] = (),
    judgements: pd.DataFrame | None = None,
    questions: Iterable[str | Path] = (),
    sessions: Iterable[str | Path] = (),
    causes: pd.DataFrame | None = None,
    amemgym_scores: Iterable[str | Path] = (),
    checkpoint_replies: Iterable[str | Path] = (),
    recall_replies: Iterable[str | Path] = (),
    environments: Mapping[str, str | Path] | None = None,
) -> DrillFrames:
    """The drill-down's inputs from their files (``environments``: benchmark -> data.json)."""
    from mnemoflow.data.amemgym import read_environment

    return DrillFrames(
        answers=_read(answers),
        judgements=judgements if judgements is not None else pd.DataFrame(),
        questions=_read(questions),
        sessions=_read(sessions, [*_SESSION_COLUMNS, "content"]),
        causes=causes if causes is not None else pd.DataFrame(),
        amemgym_scores=_read(amemgym_scores, keys=True),
        checkpoint_replies=_read(checkpoint_replies, keys=True),
        recall_replies=_read(recall_replies, keys=True),
        environments={b: read_environment(p) for b, p in (environments or {}).items()},
    )


def _cut(text: Any, limit: int = MAX_TEXT) -> str:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more chars]"


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or pd.isna(value):
        return None
    return round(float(value), 6)


def _item_texts(sessions: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(benchmark, id) -> text of a turn ("speaker: content") and of a session (its turns)."""
    if sessions.empty:
        return {}
    texts: dict[tuple[str, str], str] = {}
    speaker = sessions["speaker"].astype(str).where(sessions["speaker"] != "", sessions["role"])
    lines = speaker + ": " + sessions["content"].astype(str)
    for benchmark, turn, line in zip(
        sessions["benchmark"], sessions["turn_id"], lines, strict=True
    ):
        texts[(benchmark, turn)] = line
    ordered = sessions.assign(_line=lines).sort_values(["session_id", "turn_index"])
    for (benchmark, session), part in ordered.groupby(["benchmark", "session_id"], sort=False):
        texts.setdefault((benchmark, session), "\n".join(part["_line"]))
    return texts


def _items(ids: list[str], evidence: set[str], benchmark: str, texts: dict) -> list[list]:
    """[rank, id, text] of the first :data:`MAX_ITEMS` items shown and of every evidence item
    further down (so a long context still shows where the answer's evidence was)."""
    return [
        [rank, i, _cut(texts.get((benchmark, i), ""), MAX_ITEM_TEXT)]
        for rank, i in enumerate(ids, start=1)
        if rank <= MAX_ITEMS or i in evidence
    ]


def _cost(model: str, tokens_in: int, tokens_out: int, cache_hit: bool, prices) -> dict:
    """The answer call's tokens and dollars (a cache hit and the offline model cost nothing; no
    price: null)."""
    dollars = 0.0 if cache_hit or model in FREE_MODELS else None  # local: free
    if dollars is None and lookup(model, prices) is not None:
        dollars = usd(model, int(tokens_in), 0, int(tokens_out), prices)
    return {
        "model": model,
        "tokens_in": int(tokens_in),
        "tokens_out": int(tokens_out),
        "cache_hit": bool(cache_hit),
        "usd": _number(dollars),
    }


def _deciding(verdicts: Mapping[str, float | None]) -> float | None:
    for metric in DECIDING_METRICS:
        if metric in verdicts:
            return verdicts[metric]
    return next(iter(verdicts.values()), None) if verdicts else None


def _outcome(verdicts: dict[str, float | None], cause: str | None) -> str:
    value = _deciding(verdicts)
    if value is None:
        return "unjudged"
    if value >= WRONG_BELOW:
        return "correct"
    return cause.removesuffix("_failure") if cause else "wrong"


def _static_records(frames: DrillFrames, prices) -> dict[tuple, list[dict]]:
    """Records of the runs with an answers table (static QA, feedback protocols)."""
    answers = frames.answers
    if answers.empty:
        return {}
    questions = {}
    if not frames.questions.empty:
        for q in frames.questions.to_dict("records"):
            questions[(q["benchmark"], q["question_id"])] = q
    judged: dict[tuple, list[dict]] = {}
    if not frames.judgements.empty:
        for j in frames.judgements.to_dict("records"):
            key = (j["benchmark"], j["system"], j["protocol"], int(j["step"]), j["question_id"])
            judged.setdefault(key, []).append(j)
    causes: dict[tuple, str] = {}
    if not frames.causes.empty:
        for c in frames.causes.to_dict("records"):
            key = (c["benchmark"], c["system"], c["protocol"], int(c["step"]), c["question_id"])
            causes[key] = c["cause"]
    _check_joined(answers, questions)
    texts = _item_texts(frames.sessions)
    chunks: dict[tuple, list[dict]] = {}
    for a in answers.to_dict("records"):
        run = (a["benchmark"], a["system"], a["protocol"], int(a["step"]))
        key = (*run, a["question_id"])
        question = questions[(a["benchmark"], a["question_id"])]
        verdicts: dict[str, list[float]] = {}
        replies = []
        for j in judged.get(key, []):
            if pd.notna(j["value"]):
                verdicts.setdefault(j["metric"], []).append(float(j["value"]))
            else:
                verdicts.setdefault(j["metric"], [])
            replies.append(
                {
                    "metric": j["metric"],
                    "judge": j["judge"],
                    "value": _number(j["value"]),
                    "parse_ok": bool(j["parse_ok"]),
                    "raw": _cut(j["raw_reply"]),
                }
            )
        means = {m: (sum(v) / len(v) if v else None) for m, v in verdicts.items()}
        ids = list(a["retrieved_ids"]) if a["retrieved_ids"] is not None else []
        evidence = question.get("evidence_ids")
        evidence = list(evidence) if evidence is not None else []
        shown = _items(ids, set(evidence), a["benchmark"], texts)
        record = {
            "id": a["question_id"],
            "type": a["question_type"],
            "q": _cut(question.get("question", "")),
            **_gold(question),
            "answer": _cut(a["response"]),
            "scores": {m: _number(v) for m, v in means.items()},
            "outcome": _outcome(means, causes.get(key)),
            "judge": replies,
            "items": shown,
            "more_items": len(ids) - len(shown),
            "evidence": evidence,
            "cost": _cost(a["model"], a["tokens_in"], a["tokens_out"], a["cache_hit"], prices)
            | {"latency_s": _number(a["latency_s"]), "context_tokens": int(a["context_tokens"])},
        }
        chunks.setdefault(run, []).append(record)
    return chunks


def _check_joined(answers: pd.DataFrame, questions: dict[tuple, dict]) -> None:
    """Every answer has its question (same benchmark name, same id): a join that matches
    nothing would show empty questions, golds and items without a word."""
    for a in answers[["benchmark", "question_id"]].drop_duplicates().itertuples(index=False):
        if (a.benchmark, a.question_id) not in questions:
            known = sorted({b for b, _ in questions})
            raise ValueError(
                f"drill-down: answer to question {a.question_id!r} of benchmark "
                f"{a.benchmark!r} has no prepared question (questions name benchmarks "
                f"{known or 'none'}); the prepared tables must carry the config's benchmark name"
            )


def _meta(question: Mapping[str, Any]) -> dict[str, Any]:
    meta = question.get("meta")
    if isinstance(meta, str) and meta:
        return json.loads(meta)
    return meta if isinstance(meta, dict) else {}


def _gold(question: Mapping[str, Any]) -> dict[str, str]:
    """``gold`` as the benchmark's scorer reads it. A LoCoMo adversarial question (category 5)
    has no answer: its scorer counts a reply right when it says the information is not there
    (:data:`~mnemoflow.data.locomo.ADVERSARIAL_PHRASES`); the misleading answer the question
    invites goes beside it as ``adversarial_answer``."""
    meta = _meta(question)
    if meta.get("category") == 5 and not str(question.get("answer") or ""):
        phrases = " or ".join(f'"{p}"' for p in ADVERSARIAL_PHRASES)
        return {
            "gold": f"not mentioned in the conversation (a reply saying {phrases} is right)",
            "adversarial_answer": _cut(meta.get("adversarial_answer") or ""),
        }
    return {"gold": _cut(question.get("answer", ""))}


def natural_key(text: Any) -> tuple:
    """Sort key that orders the numbers inside ids by value: q2 before q10, u1_p2 before u1_p10."""
    parts = re.split(r"(\d+)", str(text))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def _option(index: Any, options: list[str], order: list[int]) -> str:
    """ "k. <answer>" for an option index in data.json order, k its place in the order the agent
    was shown the options (its reply names that number); "" when no option was chosen."""
    if index is None or pd.isna(index):
        return ""
    index = int(index)
    if index not in order or not 0 <= index < len(options):
        return f"option {index} (data.json order)"
    place = order.index(index)
    return f"{place + 1}. {options[index]}"


def _amemgym_records(frames: DrillFrames, prices) -> dict[tuple, list[dict]]:
    """Records of AMemGym runs: the checkpoint question with its options, the option the agent
    chose and the gold one, its raw replies, the recall probe's reply and the diagnosis."""
    scores = frames.amemgym_scores
    if scores.empty:
        return {}
    users = {
        (benchmark, user.id): user for benchmark, env in frames.environments.items() for user in env
    }

    def replies_of(frame: pd.DataFrame) -> dict[tuple, dict]:
        if frame.empty:
            return {}
        keys = [*RUN, "user_id", "period", "question_index"]
        return {tuple(r[k] for k in keys): r for r in frame.to_dict("records")}

    checkpoint = replies_of(frames.checkpoint_replies)
    recall = replies_of(frames.recall_replies)
    chunks: dict[tuple, list[dict]] = {}
    for s in scores.to_dict("records"):
        run = (s["benchmark"], s["system"], s["protocol"], int(s["step"]))
        key = (*run, s["user_id"], int(s["period"]), int(s["question_index"]))
        user = users.get((s["benchmark"], s["user_id"]))
        question = None
        if user is not None and 0 <= s["question_index"] < len(user.questions):
            question = user.questions[int(s["question_index"])]
        options = [c.answer for c in question.choices] if question is not None else []
        reply = checkpoint.get(key, {})
        order = reply.get("option_order")
        order = [int(i) for i in order] if order is not None else list(range(len(options)))
        probe = recall.get(key, {})
        failure = str(s["failure"] or "")
        if not bool(s["parse_ok"]):
            outcome = "unjudged"
        elif s["correct"] >= WRONG_BELOW:
            outcome = "correct"
        else:
            outcome = failure.split("+")[0] if failure and failure != "none" else "wrong"
        raw = reply.get("raw_replies")
        record = {
            "id": s["question_id"],
            "type": "multiple-choice",
            "q": _cut(question.query if question is not None else ""),
            "gold": _option(s["gold_option"], options, order),
            "answer": _option(s["chosen_option"], options, order),
            "scores": {"accuracy": _number(s["correct"]), "upper_bound": _number(s["upper_bound"])}
            | {"random": _number(s["random"]), "recall": _number(s["recall_correct"])},
            "outcome": outcome,
            "diagnosis": failure,
            "options": [options[i] for i in order if 0 <= i < len(options)],
            "judge": [
                {
                    "metric": "option parse",
                    "judge": "AMemGym reply parser",
                    "value": _number(s["correct"]),
                    "parse_ok": bool(s["parse_ok"]),
                    "raw": _cut("\n---\n".join(map(str, raw)) if raw is not None else ""),
                }
            ],
            "items_title": "what the agent recalls of the question's state (recall probe)",
            "items": (
                [[1, "recall probe", _cut(probe.get("reply", ""), MAX_ITEM_TEXT)]] if probe else []
            ),
            "more_items": 0,
            "evidence": [],
            "cost": _cost(
                str(reply.get("model", "")),
                reply.get("tokens_in", 0),
                reply.get("tokens_out", 0),
                bool(reply.get("cache_hit", False)),
                prices,
            )
            if reply
            else {},
        }
        chunks.setdefault(run, []).append(record)
    return chunks


@dataclass
class Drilldown:
    """The index of runs and the records of every (run, step), ready to be written."""

    runs: list[dict[str, Any]]
    chunks: dict[str, list[dict[str, Any]]]  # chunk name -> records


def drilldown(frames: DrillFrames, prices: Mapping[str, Any] | None = None) -> Drilldown:
    """Every question of every run at every step, as records (see the module docstring)."""
    table = price_table(prices)
    by_run = _static_records(frames, table) | _amemgym_records(frames, table)
    runs: dict[tuple, dict[str, Any]] = {}
    chunks: dict[str, list[dict]] = {}
    for benchmark, system, protocol, step in sorted(by_run):
        records = sorted(
            by_run[(benchmark, system, protocol, step)], key=lambda r: natural_key(r["id"])
        )
        run = runs.setdefault(
            (benchmark, system, protocol),
            {
                "key": f"r{len(runs)}",
                "benchmark": benchmark,
                "system": system,
                "protocol": protocol,
                "steps": {},
            },
        )
        name = f"{run['key']}-s{step}"
        chunks[name] = records
        run["steps"][str(step)] = {
            "chunk": name,
            "n": len(records),
            "types": sorted({r["type"] for r in records}),
            "outcomes": {o: sum(r["outcome"] == o for r in records) for o in OUTCOMES},
        }
    return Drilldown(list(runs.values()), chunks)


# --- the page --------------------------------------------------------------------------------

_PAGE = Path(__file__).with_name("drilldown_page.html")


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no "</script>" or "<!--" can end it early)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _shared_texts(records: list[dict]) -> tuple[list[dict], list[str]]:
    """Records whose items name their text by its index in one list per chunk: a turn retrieved
    for many questions (LoCoMo's ~200 questions per conversation) is stored once."""
    texts: dict[str, int] = {}
    out = []
    for record in records:
        items = [[rank, i, texts.setdefault(t, len(texts))] for rank, i, t in record["items"]]
        out.append({**record, "items": items})
    return out, list(texts)


def write_drilldown(
    data: Drilldown, folder: Path, title: str = "mnemoflow report", report: str = "report.html"
) -> list[str]:
    """``questions.html`` and ``questions/<chunk>.js`` into ``folder`` (``report``: the page
    beside the folder, linked back to); returns their names, the page first."""
    chunks = folder / "questions"
    chunks.mkdir(parents=True, exist_ok=True)
    names = []
    for name, records in data.chunks.items():
        records, texts = _shared_texts(records)
        text = (
            f"mnemoflowChunk({_script_json(name)},{_script_json(records)},{_script_json(texts)});\n"
        )
        (chunks / f"{name}.js").write_text(text, encoding="utf-8")
        names.append(f"questions/{name}.js")
    page = _PAGE.read_text(encoding="utf-8")
    page = page.replace("__TITLE__", html.escape(title)).replace("__REPORT__", html.escape(report))
    page = page.replace("__INDEX__", _script_json({"runs": data.runs, "outcomes": OUTCOMES}))
    (folder / "questions.html").write_text(page, encoding="utf-8")
    return ["questions.html", *names]
