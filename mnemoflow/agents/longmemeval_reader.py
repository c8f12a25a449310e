"""LongMemEval reading prompts: context modes, history formats and reading methods.

Follows the intent of ``src/generation/run_generation.py`` of xiaowu0162/LongMemEval:

- modes: ``long_context`` (the whole history), ``oracle`` (evidence sessions only), ``retrieval``
  (a memory system's items, or the ranked ids of an official retrieval log), ``no_history``;
- history chunks are sessions (or, for a turn-level retrieval, a retrieved user turn expanded to its
  round: the turn and the next one), shown as "### Session i / Session Date / Session Content"
  and **re-sorted by date** before rendering; ``history_format`` ``json`` (the turn list as JSON)
  or ``nl`` ("role: content" lines); ``user_only`` keeps user turns;
- ``top_k`` keeps the first k retrieved chunks, or the latest k sessions of a full history;
- reading methods: ``direct``; ``con`` (chain-of-note in one call: extract the relevant
  information, then reason); ``con_separate`` (one reading-note call per chunk first, then the
  answer from the notes: :func:`note_requests` then :func:`with_notes`).

Documented difference: a history longer than ``budget_tokens`` keeps the **newest** sessions
(whole sessions dropped from the oldest; a single session too long keeps its last turns). The
official code cuts the tokenized history string and keeps its beginning, i.e. drops the newest
sessions, which are the ones knowledge-update and temporal questions need most. Token counts use
the ``o200k_base`` BPE (:func:`mnemoflow.memory.tokens.count_tokens`, offline), as the official
code does for GPT models (``tiktoken.get_encoding("o200k_base")``).

Every builder is a pure function of (question row, chunks, options) -> ChatRequest (role "agent",
task "answer", fields {question, context: [{text, time}], question_time}) so that the offline
reader answers it from the fields and a real model from the rendered messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from mnemoflow.agents.reader_options import ReaderOptions, check_budget
from mnemoflow.data.tables import as_list
from mnemoflow.errors import ConfigError
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.tokens import count_tokens

PROMPT_VERSION = "lme-reader-v1"
MODES = ("long_context", "oracle", "retrieval", "no_history")
FORMATS = ("json", "nl")
METHODS = ("direct", "con", "con_separate")

_INTRO = (
    "I will give you several history chats between you and a user. Please answer the question "
    "based on the relevant chat history."
)
_STEPWISE = (
    " Answer the question step by step: first extract all the relevant information, and then "
    "reason over the information to get the answer."
)
_NOTE_PROMPT = (
    "I will give you a chat history between you and a user, as well as a question from the user. "
    "Write reading notes that extract all the user information relevant to answering the "
    'question. If no relevant information is found, just output "empty".\n\n\n'
    "Chat History:\nSession Date: {date}\nSession Content:\n{content}\n\n"
    "Question Date: {question_date}\nQuestion: {question}\n"
    "Extracted note (information relevant to answering the question):"
)


@dataclass(frozen=True)
class ReadingOptions(ReaderOptions):
    """How the reader sees the history (config ``reader:`` of a LongMemEval benchmark)."""

    mode: str = "retrieval"
    history_format: str = "json"
    user_only: bool = False
    top_k: int | None = None
    method: str = "direct"
    budget_tokens: int = 120_000
    #: An official retrieval log (JSONL) read in place of the memory's items (retrieval mode).
    retrieval_log: str | None = None

    def __post_init__(self) -> None:
        for key, allowed in (("mode", MODES), ("history_format", FORMATS), ("method", METHODS)):
            if getattr(self, key) not in allowed:
                raise ConfigError(
                    f"config reader.{key}: one of {list(allowed)}, got {getattr(self, key)!r}"
                )
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ConfigError(f"config reader.top_k: a positive integer, got {self.top_k!r}")
        check_budget(self.budget_tokens)
        if self.retrieval_log is not None:
            if not isinstance(self.retrieval_log, str) or not self.retrieval_log:
                raise ConfigError(
                    f"config reader.retrieval_log: a file path, got {self.retrieval_log!r}"
                )
            if self.mode != "retrieval":
                raise ConfigError(
                    f"config reader.retrieval_log: needs mode: retrieval, got {self.mode!r}"
                )


@dataclass
class Chunk:
    """One unit of history shown to the reader: a session, a round, or a memory's own text."""

    time: str
    turns: list[dict[str, str]] = field(default_factory=list)  # {"role", "content"}
    source_ids: list[str] = field(default_factory=list)
    text: str | None = None  # a memory item that is not raw turns (a fact, a summary)
    note: str | None = None  # con_separate: the reading note that replaces the content

    def plain(self) -> str:
        """What the offline reader reads: the note, the memory text, or the turn contents."""
        if self.note is not None:
            return self.note
        if self.text is not None:
            return self.text
        return "\n".join(turn["content"] for turn in self.turns)


# --- building chunks from the unified tables --------------------------------------------------


def episode_turns(
    sessions: pd.DataFrame, episode_sessions: pd.DataFrame | None, episode_id: str
) -> pd.DataFrame:
    """The turns of one episode in history order, with their session's time.

    Works for both layouts: sessions owned by the episode, or sessions stored once and listed per
    episode in ``episode_sessions`` (LongMemEval haystacks).
    """
    if episode_sessions is not None and not episode_sessions.empty:
        order = episode_sessions[episode_sessions["episode_id"] == episode_id]
        if not order.empty:
            turns = sessions[sessions["session_id"].isin(order["session_id"])].drop_duplicates(
                "turn_id"
            )
            turns = turns.drop(columns=["session_index", "session_time"]).merge(
                order[["session_id", "session_index", "session_time"]], on="session_id"
            )
            return turns.sort_values(["session_index", "turn_index"]).reset_index(drop=True)
    turns = sessions[sessions["episode_id"] == episode_id]
    return turns.sort_values(["session_index", "turn_index"]).reset_index(drop=True)


def _turn(record: dict[str, Any]) -> dict[str, str]:
    return {"role": record["role"], "content": str(record["content"]).strip()}


def session_chunks(turns: pd.DataFrame, session_ids: list[str] | None = None) -> list[Chunk]:
    """One chunk per session of ``turns`` (in history order), optionally only ``session_ids``."""
    # one pass over the records, grouped in order of first appearance (a groupby and a frame per
    # session cost a long history most of its reading time); a session's turns by turn index
    sessions: dict[Any, list[dict[str, Any]]] = {}
    for record in turns.to_dict("records"):
        if not pd.isna(record["session_id"]):  # as groupby drops a missing key
            sessions.setdefault(record["session_id"], []).append(record)
    chunks = []
    for session_id, records in sessions.items():
        if session_ids is not None and session_id not in session_ids:
            continue
        chunks.append(_records_chunk(sorted(records, key=lambda r: r["turn_index"])))
    return chunks


def _records_chunk(records: list[dict[str, Any]]) -> Chunk:
    """A chunk of consecutive turns of one session."""
    return Chunk(
        time=str(records[0]["session_time"]),
        turns=[_turn(r) for r in records],
        source_ids=[r["turn_id"] for r in records],
    )


def evidence_sessions(question: dict[str, Any], turns: pd.DataFrame) -> list[str]:
    """The oracle's sessions: meta ``answer_session_ids``, else sessions holding evidence turns."""
    meta = question.get("meta")
    meta = json.loads(meta) if isinstance(meta, str) and meta else (meta or {})
    ids = as_list(meta.get("answer_session_ids"))
    if not ids:
        evidence = set(as_list(question.get("evidence_ids")))
        ids = list(dict.fromkeys(turns.loc[turns["turn_id"].isin(evidence), "session_id"]))
    return ids


def history_chunks(
    question: dict[str, Any], turns: pd.DataFrame, options: ReadingOptions
) -> list[Chunk]:
    """Chunks for the modes that read the stored history itself (long_context, oracle)."""
    if options.mode == "no_history":
        return []
    if options.mode == "long_context":
        return session_chunks(turns)
    if options.mode == "oracle":
        return session_chunks(turns, evidence_sessions(question, turns))
    raise ValueError("history_chunks: retrieval mode reads memory items; use item_chunks")


def official_id(corpus_id: str) -> str:
    """An official retrieval-log corpus id as a unified id (``noans_`` marks non-evidence turns)."""
    return corpus_id.replace("noans_", "answer_")


TurnIndex = tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]


def turn_index(turns: pd.DataFrame) -> TurnIndex:
    """The turns by id, and each session's turns in order (what :func:`id_chunks` looks up)."""
    by_turn = {r["turn_id"]: r for r in turns.to_dict("records")}
    by_session: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(by_turn.values(), key=lambda r: r["turn_index"]):
        by_session.setdefault(record["session_id"], []).append(record)
    return by_turn, by_session


def id_chunks(
    ranked_ids: list[str], turns: pd.DataFrame, index: TurnIndex | None = None
) -> list[Chunk]:
    """Chunks for ranked session or turn ids (an official retrieval log, in rank order).

    A session id gives its session; a turn id gives its round (that turn and the next one), as the
    official reader expands turn-level retrieval results. Unknown ids are skipped, as officially.
    ``index`` is :func:`turn_index` of ``turns`` when the caller already has it (one per question,
    not one per retrieved item).
    """
    by_turn, by_session = index if index is not None else turn_index(turns)
    chunks = []
    for raw in ranked_ids:
        ident = official_id(raw)
        if ident in by_session:
            records = by_session[ident]
        elif ident in by_turn:
            record = by_turn[ident]
            session = by_session[record["session_id"]]
            position = session.index(record)
            records = session[position : position + 2]
        else:
            continue
        chunks.append(_records_chunk(records))
    return chunks


def item_chunks(items: list[Any], turns: pd.DataFrame | None = None) -> list[Chunk]:
    """Chunks for a memory system's retrieved items (rank order).

    An item whose source ids are one user turn is expanded to its round; an item whose source ids
    are turns of the history is shown as those turns; any other item (a fact, a summary) is shown
    as its own text with its time.
    """
    chunks = []
    index = None
    for get, sources, records in with_source_turns(items, turns):
        if records is None:
            chunks.append(
                Chunk(time=str(get("time") or ""), text=str(get("text")), source_ids=sources)
            )
        elif len(records) == 1 and records[0]["role"] == "user":
            index = index if index is not None else turn_index(turns)
            chunks.extend(id_chunks(sources, turns, index))
        else:
            records = sorted(records, key=lambda r: r["turn_index"])
            chunks.append(
                Chunk(
                    time=str(records[0]["session_time"]),
                    turns=[_turn(r) for r in records],
                    source_ids=[r["turn_id"] for r in records],
                )
            )
    return chunks


def with_source_turns(
    items: list[Any], turns: pd.DataFrame | None
) -> list[tuple[Callable[[str], Any], list[str], list[dict[str, Any]] | None]]:
    """Each retrieved item (a MemoryItem or its dict form) as (a getter of its fields, its source
    ids, the history records of those ids in their order); the records are None unless every
    source id is a turn of ``turns`` (a fact or a summary is then shown as its own text)."""
    getters = [
        item.get if isinstance(item, dict) else lambda key, obj=item: getattr(obj, key)
        for item in items
    ]
    listed = [as_list(get("source_ids")) for get in getters]
    by_turn = {}
    if turns is not None:  # only the rows the items name (a question's, not the history's)
        named = turns[turns["turn_id"].isin({s for sources in listed for s in sources})]
        by_turn = {r["turn_id"]: r for r in named.to_dict("records")}
    resolved = []
    for get, sources in zip(getters, listed, strict=True):
        known = bool(sources) and all(s in by_turn for s in sources)
        resolved.append((get, sources, [by_turn[s] for s in sources] if known else None))
    return resolved


# --- selecting and rendering ------------------------------------------------------------------


def select(chunks: list[Chunk], options: ReadingOptions) -> list[Chunk]:
    """Apply ``user_only`` and ``top_k`` (first k retrieved; latest k of a full history)."""
    if options.user_only:
        kept = []
        for chunk in chunks:
            if chunk.text is not None or chunk.note is not None:
                kept.append(chunk)
                continue
            users = [t for t in chunk.turns if t["role"] == "user"]
            if users:
                kept.append(replace(chunk, turns=users))
        chunks = kept
    if options.top_k is not None:
        chunks = (
            chunks[-options.top_k :] if options.mode != "retrieval" else chunks[: options.top_k]
        )
    return chunks


def _content(chunk: Chunk, history_format: str) -> str:
    if history_format == "json":
        if chunk.note is not None:
            return "\n" + json.dumps({"session_summary": chunk.note})
        if chunk.text is not None:
            return "\n" + json.dumps(chunk.text)
        return "\n" + json.dumps(chunk.turns)
    if chunk.note is not None:
        return "\n\n" + chunk.note
    if chunk.text is not None:
        return "\n\n" + chunk.text
    return "".join(f"\n\n{t['role']}: {t['content']}" for t in chunk.turns)


def render_history(chunks: list[Chunk], history_format: str) -> str:
    return "".join(
        f"\n### Session {i}:\nSession Date: {chunk.time}\nSession Content:\n"
        f"{_content(chunk, history_format)}\n"
        for i, chunk in enumerate(chunks, start=1)
    )


def fit_budget(chunks: list[Chunk], options: ReadingOptions) -> list[Chunk]:
    """Keep the newest chunks whose rendered history fits ``budget_tokens`` (chunks are by date)."""
    kept: list[Chunk] = []
    used = 0
    for chunk in reversed(chunks):
        cost = count_tokens(render_history([chunk], options.history_format))
        if used + cost > options.budget_tokens:
            if not kept and chunk.turns and chunk.text is None and chunk.note is None:
                kept.append(_tail_of(chunk, options))
            break
        kept.append(chunk)
        used += cost
    return list(reversed(kept))


def _tail_of(chunk: Chunk, options: ReadingOptions) -> Chunk:
    """The last turns of a single session that alone exceeds the budget."""
    for start in range(1, len(chunk.turns) + 1):
        tail = replace(chunk, turns=chunk.turns[start:], source_ids=chunk.source_ids[start:])
        if count_tokens(render_history([tail], options.history_format)) <= options.budget_tokens:
            return tail
    return replace(chunk, turns=[], source_ids=[])


def prepare(chunks: list[Chunk], options: ReadingOptions) -> list[Chunk]:
    """select -> sort by date (stable) -> fit the budget: the chunks the prompt will show."""
    chosen = sorted(select(chunks, options), key=lambda chunk: chunk.time)
    return fit_budget(chosen, options)


def chunks_for(
    question: dict[str, Any],
    turns: pd.DataFrame,
    options: ReadingOptions,
    items: list[Any] | None = None,
    log_ids: list[str] | None = None,
) -> list[Chunk]:
    """The prepared chunks for one question, whatever the mode (the agent's one entry point).

    ``turns`` is :func:`episode_turns` of the question's episode; in retrieval mode the chunks come
    from ``log_ids`` (an official retrieval log's ranked corpus ids) when given, else ``items``.
    With ``method: con_separate``, pass the result through :func:`note_requests` /
    :func:`with_notes` before :func:`build_request`.
    """
    if options.mode == "retrieval":
        chunks = (
            id_chunks(log_ids, turns) if log_ids is not None else item_chunks(items or [], turns)
        )
    else:
        chunks = history_chunks(question, turns, options)
    return prepare(chunks, options)


def context_ids(chunks: list[Chunk]) -> list[str]:
    """Source turn ids of the chunks shown (the answers table's ``retrieved_ids``)."""
    return list(dict.fromkeys(s for chunk in chunks for s in chunk.source_ids))


def build_request(
    question: dict[str, Any], chunks: list[Chunk], options: ReadingOptions
) -> ChatRequest:
    """The answer request for ``question`` over ``chunks`` (already :func:`prepare`-d)."""
    question_text = str(question["question"])
    question_time = str(question.get("question_time") or "")
    if options.mode == "no_history":
        prompt = question_text + (" Answer step by step." if options.method == "con" else "")
        chunks = []
    else:
        intro = _INTRO + (_STEPWISE if options.method == "con" else "")
        answer_cue = "Answer (step by step):" if options.method == "con" else "Answer:"
        prompt = (
            f"{intro}\n\n\nHistory Chats:\n\n{render_history(chunks, options.history_format)}\n\n"
            f"Current Date: {question_time}\nQuestion: {question_text}\n{answer_cue}"
        )
    return ChatRequest(
        role="agent",
        task="answer",
        messages=[{"role": "user", "content": prompt}],
        fields={
            "question": question_text,
            "context": [{"text": chunk.plain(), "time": chunk.time} for chunk in chunks],
            "question_time": question_time,
        },
    )


def note_requests(question: dict[str, Any], chunks: list[Chunk]) -> list[ChatRequest]:
    """con_separate, first pass: one reading-note request per chunk (task "reading_note")."""
    question_text = str(question["question"])
    question_time = str(question.get("question_time") or "")
    requests = []
    for chunk in chunks:
        content = chunk.text if chunk.text is not None else json.dumps(chunk.turns)
        prompt = _NOTE_PROMPT.format(
            date=chunk.time, content=content, question_date=question_time, question=question_text
        )
        requests.append(
            ChatRequest(
                role="agent",
                task="reading_note",
                messages=[{"role": "user", "content": prompt}],
                fields={
                    "question": question_text,
                    "context": [{"text": chunk.plain(), "time": chunk.time}],
                },
            )
        )
    return requests


def with_notes(chunks: list[Chunk], notes: list[str]) -> list[Chunk]:
    """con_separate, second pass: the chunks with their notes in place of their content."""
    if len(notes) != len(chunks):
        raise ValueError(f"with_notes: {len(notes)} notes for {len(chunks)} chunks")
    return [replace(chunk, note=note.strip()) for chunk, note in zip(chunks, notes, strict=True)]
