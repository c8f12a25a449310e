"""Static long-term-memory QA over a step chain: ingest -> answer -> judge -> score.

Memory grows step by step: step k loads step k-1's snapshot of each episode and adds the sessions
whose ``step`` is k. Questions whose ``checkpoint`` is k are answered from step k's snapshot. Static
benchmarks (LoCoMo, LongMemEval) have a single step 0; the synthetic benchmark's periods are steps.

Episodes are independent, so each stage runs them concurrently; a real endpoint then sees many
requests in flight, bounded by the role's concurrency limit in the gateway.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from mnemoflow.agents.longmemeval_reader import episode_turns
from mnemoflow.agents.readers import read, reader_config
from mnemoflow.data.tables import ANSWERS, SCORES, read_table
from mnemoflow.errors import ConfigError
from mnemoflow.eval.static_qa.diagnosis import (
    diagnose,
    diagnosis_rates,
    diagnosis_scores,
    report_rows,
)
from mnemoflow.eval.static_qa.footprint import footprint_scores
from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.eval.static_qa.rescore import (
    InputError,
    Ranking,
    answer_rankings,
    read_retrievals,
    score_judged,
)
from mnemoflow.llm.context import item_scope
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest, Reply
from mnemoflow.memory.base import Message, full_spec
from mnemoflow.protocols.snapshot import (
    MANIFEST,
    STORED_IDS,
    publishing,
    save_episode,
    write_manifest,
)
from mnemoflow.protocols.step import StepContext

PROTOCOL = "qa"
#: Episodes processed at once; model concurrency itself is limited per endpoint by the gateway.
EPISODE_CONCURRENCY = 16

T = TypeVar("T")


def shard_episodes(episode_ids: Iterable[str], shard: int, n_shards: int) -> list[str]:
    """Episodes of one shard: sorted ids dealt round-robin, so shards are balanced and stable."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} out of range for {n_shards} shards")
    ordered = sorted(set(episode_ids))
    return ordered[shard::n_shards]


def episodes_in_flight(gateway: Any, role: str) -> int:
    """Episodes processed at once: twice the concurrency of the endpoint ``role`` calls (at least
    :data:`EPISODE_CONCURRENCY`).

    An episode's calls are sequential (a writer's batches, a question after another), and a
    LongMemEval episode asks one question: with no more episodes than slots, the endpoint idles
    while an episode loads its memory or retrieves. A test double without specs gets the default.
    """
    spec = getattr(gateway, "specs", {}).get(role)
    return max(EPISODE_CONCURRENCY, 2 * spec.concurrency if spec is not None else 0)


def episode_dirname(episode_id: str) -> str:
    """A file-system-safe, collision-free folder name for an episode id."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", episode_id)
    if safe != episode_id or not safe:
        safe += "-" + hashlib.sha1(episode_id.encode("utf-8")).hexdigest()[:8]
    return safe


async def bounded(items: list[T], worker: Callable[[T], Awaitable[Any]], limit: int) -> list[Any]:
    """``worker`` over ``items`` with at most ``limit`` running at once; results in item order."""
    semaphore = asyncio.Semaphore(limit)

    async def run(item: T) -> Any:
        async with semaphore:
            return await worker(item)

    return await asyncio.gather(*(run(item) for item in items))


def to_messages(turns: pd.DataFrame) -> list[Message]:
    """Unified session rows as memory messages (conversation time = the session's time)."""
    columns = ("turn_id", "session_id", "role", "content", "speaker", "session_time")
    return [
        Message(turn_id=t, session_id=s, role=r, content=c, speaker=p, time=when)
        for t, s, r, c, p, when in zip(*(_values(turns[name]) for name in columns), strict=True)
    ]


def _values(column: pd.Series) -> list[Any]:
    """A column's values as iterating it gives them; a text column's converted in one call (an
    Arrow-backed one is slow to iterate value by value)."""
    if pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype):
        return column.to_numpy().tolist()
    return list(column)


def episode_batch(
    sessions: pd.DataFrame, episode_sessions: pd.DataFrame, episode_id: str, step: int
) -> list[Message]:
    """The messages an episode's memory receives at ``step``, in session then turn order."""
    mine = episode_sessions[
        (episode_sessions.episode_id == episode_id) & (episode_sessions.step == step)
    ].sort_values("session_index")
    if mine.empty:
        return []
    turns = sessions[sessions.session_id.isin(set(mine.session_id))]
    # Order and times come from the episode map: a shared session sits at a different place per
    # episode.
    order = {sid: i for i, sid in enumerate(mine.session_id)}
    times = dict(zip(mine.session_id, mine.session_time, strict=True))
    turns = turns.drop_duplicates(["session_id", "turn_id"]).copy()
    turns["_order"] = turns.session_id.map(order)
    turns["session_time"] = turns.session_id.map(times)
    turns = turns.sort_values(["_order", "turn_index"], kind="stable")
    return to_messages(turns)


async def ingest(
    sessions: pd.DataFrame,
    episode_sessions: pd.DataFrame,
    episodes: list[str],
    ctx: StepContext,
    step: int,
    previous: Path | None,
    out_dir: Path,
) -> dict[str, Any]:
    """Build step ``step``'s snapshot of every episode into ``out_dir`` (written atomically).

    The context's ``progress`` is called once per finished episode, with no cache-hit flag: an
    episode's writes are many model calls (or none), so its bar counts episodes, not calls.
    """
    stored: dict[str, list[str]] = {}
    stats: dict[str, dict[str, Any]] = {}

    async def one(episode: str) -> None:
        name = episode_dirname(episode)
        memory = ctx.build() if previous is None else ctx.load(Path(previous) / name)
        await memory.add(episode_batch(sessions, episode_sessions, episode, step), {"step": step})
        save_episode(staging, name, memory)
        ids = memory.stored_ids()
        if ids is not None:
            stored[episode] = sorted(ids)
        stats[episode] = memory.stats()
        ctx.tick(None)

    with publishing(out_dir) as staging:  # the folder ``one`` saves into
        await bounded(episodes, one, episodes_in_flight(ctx.gateway, "memory_writer"))
        manifest = {
            "system": ctx.system_spec,
            "step": step,
            "episodes": {e: episode_dirname(e) for e in episodes},
            "stats": stats,
        }
        write_manifest(staging, manifest, stored)
    return manifest


def snapshot_system(snapshot: Path, query_spec: dict[str, Any]) -> dict[str, Any]:
    """The whole spec of the system that answers from ``snapshot``: the ingest-time parameters
    it was built with (its manifest) and this job's query-time ones (``memory.base.stage_spec``).
    A snapshot without a manifest (built outside ``ingest``) is answered with ``query_spec``."""
    manifest = Path(snapshot) / MANIFEST
    if not manifest.is_file():
        return query_spec
    return full_spec(json.loads(manifest.read_text(encoding="utf-8"))["system"], query_spec)


def run_keys(benchmark: str, system: str, step: int) -> dict[str, Any]:
    return {"benchmark": benchmark, "system": system, "protocol": PROTOCOL, "step": step}


async def answer(
    questions: pd.DataFrame,
    snapshot: Path,
    ctx: StepContext,
    reader: str | dict[str, Any] | None = "generic",
    use_options: bool = False,
    sessions: pd.DataFrame | None = None,
    episode_sessions: pd.DataFrame | None = None,
    failures: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Answer every question from its episode's snapshot; one row per question (ANSWERS), labelled
    with the context's keys.

    A question one of whose reader calls was not sent (its prompt over the context window,
    ``overflow: fail``) keeps its row with the empty response, and ``failures`` (when given)
    gets its id with the reason: the judge then leaves it unscored.

    Readers with reading modes that show more than the memory returned (LoCoMo / LongMemEval
    long-context and oracle modes) read the episode's turns from ``sessions``. A LongMemEval
    reader with ``retrieval_log`` reads each question's ranking from that official log instead
    of asking the memory.
    """
    ctx = ctx.with_spec(snapshot_system(snapshot, ctx.system_spec))
    gateway = ctx.gateway
    reader_name, reader_options = reader_config(reader)
    log_path = retrieval_log_path(reader)
    log = retrieval_log(log_path) if log_path else None
    rows: list[dict[str, Any]] = []
    overlap = reads_overlap(gateway)

    async def one(episode: str) -> None:
        memory = ctx.load(Path(snapshot) / episode_dirname(episode))
        turns = None
        if reader_name != "generic" and sessions is not None:
            turns = episode_turns(sessions, episode_sessions, episode)
        mine = questions[questions["episode_id"] == episode]
        reading_now: list[asyncio.Task[None]] = []
        for index, question in enumerate(mine.to_dict("records")):
            log_ids = None
            if log is not None:
                if question["question_id"] not in log:
                    raise InputError(
                        f"{log_path}: no ranking for question_id {question['question_id']!r}"
                    )
                items, log_ids, retrieval_s = [], log[question["question_id"]], None
            else:
                started = time.perf_counter()
                items = await memory.retrieve(question["question"])
                retrieval_s = time.perf_counter() - started
            reading = (reader_name, reader_options, question, items, turns, gateway)
            timing = (retrieval_s if index else None, None if index else retrieval_s)
            if overlap:  # the next retrieval goes on while this question is read
                task = asyncio.ensure_future(
                    answer_one(episode, question, reading, log_ids, timing)
                )
                reading_now.append(task)
            else:
                await answer_one(episode, question, reading, log_ids, timing)
        await asyncio.gather(*reading_now)

    async def answer_one(
        episode: str,
        question: dict[str, Any],
        reading: tuple[Any, ...],
        log_ids: list[str] | None,
        timing: tuple[float | None, float | None],
    ) -> None:
        label = f"question {question['question_id']}"
        with item_scope(label):
            result = await read(*reading, use_options, log_ids)
        if failures is not None and label in gateway.ledger.failed_items:
            failures[question["question_id"]] = gateway.ledger.failed_items[label]
        rows.append(
            {
                **ctx.keys,
                "episode_id": episode,
                "question_id": question["question_id"],
                "question_type": question["question_type"],
                "response": result.response,
                "retrieved_ids": result.shown_ids,
                "ranked_ids": result.ranked_ids,
                "context_tokens": result.context_tokens,
                "model": result.reply.model,
                "cache_hit": result.reply.cache_hit,
                "tokens_in": result.reply.tokens_in,
                "tokens_out": result.reply.tokens_out,
                "latency_s": result.reply.latency_s,
                # the episode's first retrieve opens the loaded memory (indexes, models,
                # a product's store): timed apart, as eval.static_qa.footprint reports it
                "retrieval_s": timing[0],
                "retrieval_cold_s": timing[1],
            }
        )
        ctx.tick(result.reply.cache_hit)

    await bounded(sorted(set(questions["episode_id"])), one, episodes_in_flight(gateway, "agent"))
    frame = pd.DataFrame(rows, columns=ANSWERS.names)
    return frame.sort_values("question_id", kind="stable").reset_index(drop=True)


def reads_overlap(gateway: Any) -> bool:
    """Whether an episode's questions are read while its next ones are retrieved: with the
    agent's ``prefix_dispatch`` on, so the gateway sees an episode's requests together and can
    send those sharing a prompt prefix (the conversation a long-context reader shows) one after
    another. Retrieval stays one question after another; the answers are the same."""
    spec = getattr(gateway, "specs", {}).get("agent")
    return bool(spec is not None and spec.prefix_dispatch and spec.backend == "openai")


def retrieval_log_path(reader: str | dict[str, Any] | None) -> str | None:
    """The official retrieval log a LongMemEval reader reads its rankings from, if any (the
    workflow makes it an input of the answer rule, so editing the file re-runs answering)."""
    name, options = reader_config(reader)
    return options.get("retrieval_log") if name == "longmemeval" else None


def check_reader(spec: dict[str, Any], where: str) -> None:
    """At startup: the benchmark's ``reader`` (name, options, a retrieval log that exists), one
    line naming ``<where>.reader`` (``where``: ``config benchmarks.NAME``)."""
    try:
        path = retrieval_log_path(spec.get("reader"))
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("config reader", f"{where}.reader", 1)) from None
    if path and not Path(path).is_file():
        raise ConfigError(f"{where}.reader.retrieval_log: no such file {path}")


def retrieval_log(path: str) -> dict[str, list[str]]:
    """question_id -> ranked corpus ids of an official LongMemEval retrieval log (JSONL)."""
    if not Path(path).is_file():
        raise InputError(f"config reader.retrieval_log: no such file {path}")
    return read_retrievals(path)


async def judge(
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    gateway: Gateway,
    kind: str = "generic",
    repeats: int = 1,
    seed: int = 0,
    progress=None,
    failed: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Judge every answer with the benchmark's judge (JUDGEMENTS; see eval.static_qa.judges).

    The ``failed`` answers (question id -> why: the reader's prompt did not fit) are not asked
    about: their rows are unscored (``value`` NaN, ``parse_ok`` false, no reply), so they count
    in ``<metric>:unscored`` and in no accuracy.
    """
    failed = failed or {}
    missed = answers["question_id"].isin(list(failed))
    asked = answers[~missed]
    judged = await judge_answers(gateway, kind, questions, asked, repeats, seed, progress)
    if not missed.any():
        return judged
    rows = await judge_answers(NotAsked(gateway), kind, questions, answers[missed], repeats, seed)
    rows["value"], rows["parse_ok"], rows["raw_reply"] = float("nan"), False, ""
    if "value_reference" in rows:  # a reference's own reading of a reply: none was given
        rows["value_reference"] = float("nan")
    frame = pd.concat([judged, rows], ignore_index=True)
    return frame.sort_values("question_id", kind="stable").reset_index(drop=True)


class NotAsked:
    """A gateway stand-in for answers that failed: every call comes back not sent and unparsed,
    so the judge's own code lays out their rows (metrics, repeats) without a model call."""

    def __init__(self, gateway: Gateway) -> None:
        self.model_name = gateway.model_name

    async def chat(self, request: ChatRequest, parse: Any = None) -> Reply:
        return Reply("", self.model_name(request.role), 0, 0, 0.0, False, parse_ok=False)


def read_stored(snapshots: list[Path]) -> tuple[pd.DataFrame, set[str]]:
    """(episode_id, turn_id) pairs held by the memories, and the episodes whose set is known."""
    pairs: list[tuple[str, str]] = []
    known: set[str] = set()
    for snapshot in snapshots:
        stored = json.loads((Path(snapshot) / STORED_IDS).read_text(encoding="utf-8"))
        for episode, ids in stored.items():
            known.add(episode)
            pairs.extend((episode, turn) for turn in ids)
    return pd.DataFrame(pairs, columns=["episode_id", "turn_id"]), known


@dataclass
class Scored:
    """A run's aggregate scores, per-question scores and diagnosis (report layout)."""

    scores: pd.DataFrame
    question_scores: pd.DataFrame
    diagnosis: pd.DataFrame


def score(
    judgements: pd.DataFrame,
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    kind: str,
    stored: pd.DataFrame,
    known_episodes: set[str],
    snapshots: Iterable[Path] = (),
) -> Scored:
    """Judged metrics, retrieval metrics, the write / read / utilization diagnosis of a run,
    and the memory's footprint (retrieval latency, size of the ``snapshots``:
    eval.static_qa.footprint).

    Retrieval is scored on the memory's ranking (``ranked_ids``) over every answered question, an
    empty ranking counting as zero recall, so a memory that returns nothing is not silently left
    out of the average. The diagnosis reads what the reader was shown (``retrieved_ids``).
    """
    per_question, judged = score_judged(
        kind, judgements, questions, sessions, answers, Ranking(answer_rankings(answers))
    )
    diagnosis = diagnose(answers, judgements, questions, stored, known_episodes)
    rates = diagnosis_rates(diagnosis, answers, judgements)
    footprint = footprint_scores(answers, snapshots)
    scores = pd.concat([judged, diagnosis_scores(rates), footprint], ignore_index=True)
    return Scored(scores[SCORES.names], per_question, report_rows(rates))


def question_causes(
    shards: Iterable[Path], judgements: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame:
    """Per wrong answer of the static QA shards (``.../shard{h}`` folders holding
    ``answers.parquet`` and the ``memory`` snapshot it was answered from): run keys, question_id
    and its ``cause``, as :func:`score` diagnoses it (the report's per-question drill-down)."""
    frames = []
    for shard in shards:
        shard = Path(shard)
        answers = read_table(shard / "answers.parquet", "answers")
        if answers.empty:
            continue
        stored, known = read_stored([shard / "memory"])
        keys = answers[["benchmark", "system", "protocol", "step"]].drop_duplicates()
        judged = judgements.merge(keys, on=list(keys.columns))
        # questions of this shard's benchmark only: two entries of one loader share question ids
        own = questions[questions["benchmark"].isin(keys["benchmark"])]
        frames.append(diagnose(answers, judged, own, stored, known))
    if not frames:
        return pd.DataFrame(columns=["benchmark", "system", "protocol", "step", "question_id"])
    return pd.concat(frames, ignore_index=True)
