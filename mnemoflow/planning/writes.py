"""A memory system's writes before a run: writer calls and embedded texts, as the system says.

The planner asks the system how it writes (``MemorySystem.writes``: a
:class:`~mnemoflow.memory.base.WritePattern`) and counts over the messages a step hands it:
batches of ``update_batch`` messages (one message each without a batch parameter); a buffered
system writes a batch only once its (update_batch, local_window) buffer is full, the buffer
carried from step to step; each written batch costs the pattern's writer calls, and one embedded
text is a message, a session or a fact (what the writer extracts, stood in for by its batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.lexical import count_tokens
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory import writer
from mnemoflow.memory.base import MemoryItem, Message, WritePattern, resolve, without_labels
from mnemoflow.memory.buffer import render
from mnemoflow.planning.plan import Line
from mnemoflow.planning.tokens import embedded_tokens, sent_tokens, text_tokens


@dataclass
class Writes:
    """One system's writes over some steps: writer calls per task with their known prompt tokens
    (rendered as the system renders them, stored facts or entries shown as stand-ins), and the
    texts it embeds."""

    #: writer task -> [calls, known prompt tokens]
    writer: dict[str, list[float]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    batch_size: int = 1
    pattern: WritePattern = field(default_factory=WritePattern)


def pattern_of(system_spec: Mapping[str, Any]) -> tuple[WritePattern, dict[str, Any]]:
    """(how the configured system writes, its parameters over the class defaults)."""
    params = without_labels(dict(system_spec))
    cls = resolve(params.get("type") or params.get("class"))
    merged = {**cls.defaults, **{k: v for k, v in params.items() if k not in ("type", "class")}}
    return cls.write_pattern_for(merged), merged


def written_batches(total: int, batch: int, window: int) -> int:
    """Batches a buffered system has written once ``total`` messages were added: a batch leaves
    when the buffer holds ``batch + window``, so the newest ``window`` stay back."""
    return max(0, (total - window) // batch)


def fact_tokens(pattern: WritePattern, tokens_out: Callable[[str, str], float]) -> float | None:
    """Tokens of one stored fact or entry: the writer's first call replies the batch's facts
    (``None``: the system asks no writer)."""
    if not pattern.writer_tasks:
        return None
    return tokens_out(writer.ROLE, pattern.writer_tasks[0]) / max(pattern.facts_per_batch, 1e-9)


def writer_request(
    task: str, batch: list[Message], held: int, params: Mapping[str, Any], fact: str
) -> ChatRequest:
    """The writer's request of ``task`` for ``batch`` as the system builds it, with ``held``
    stored facts or entries shown as stand-ins (``fact``: one stand-in fact's text)."""
    if task == writer.UPDATE_FACTS:  # the batch's facts and their similar stored ones
        shown = min(held, int(params.get("similar_k", 5)))
        memories = [{"id": str(n), "text": fact} for n in range(shown)]
        return writer.update_facts_request([fact], memories)
    if task in (writer.ORGANIZE, writer.KV_UPDATE):  # every entry held, then the batch
        entries = min(held, int(params.get("max_entries", held)))
        memory = [{"key": f"key{n}", "value": fact, "time": ""} for n in range(entries)]
        if task == writer.ORGANIZE:
            return writer.organize_request(memory, batch)
        return writer.kv_update_request(memory, batch)
    if task == writer.NOTE:
        return writer.note_request(batch[0])
    return writer.extract_facts_request(batch)


def prompt_of(
    pattern: WritePattern,
    index: int,
    batch: list[Message],
    held: int,
    params: Mapping[str, Any],
    fact: str,
    backend: str,
) -> float:
    """Prompt tokens of the writer's call ``writer_tasks[index]`` for ``batch``: a product's own
    prompt as it states it (``prompt_tokens``: fixed words and the batch's text some times over,
    scaled to ``backend``'s count as the batch's text is), else rendered as the system renders
    it."""
    if pattern.prompt_tokens:
        fixed, times = pattern.prompt_tokens[index]
        text = "\n".join(render(m) for m in batch)
        words = count_tokens(text)
        scale = text_tokens(text, backend) / words if backend != "offline" and words else 1.0
        return (fixed + times * words) * scale
    task = pattern.writer_tasks[index]
    return sent_tokens(writer_request(task, batch, held, params, fact).messages, backend)


def planned_writes(
    system_spec: Mapping[str, Any],
    streams: Iterable[tuple[list[Message], int]],
    backend: str,
    fact: str = "",
) -> Writes:
    """The writes of one step: ``streams`` holds, per episode, every non-empty message added up
    to the end of the step and how many of them earlier steps added; ``fact``: a stand-in of
    one stored fact or memory entry (the writer's reply per fact)."""
    pattern, params = pattern_of(system_spec)
    batch = int(params.get(pattern.batch_param, 1)) if pattern.batch_param else 1
    window = int(params.get("local_window", 0)) if pattern.buffered else 0
    out = Writes(batch_size=batch, pattern=pattern)
    for messages, before in streams:
        if pattern.buffered:  # the buffer carries over: batches are cut from the whole stream
            first = written_batches(before, batch, window)
            last = written_batches(len(messages), batch, window)
            batches = [messages[i * batch : (i + 1) * batch] for i in range(first, last)]
        else:  # each step's messages are cut into batches of their own
            batches = [messages[i : i + batch] for i in range(before, len(messages), batch)]
        first = written_batches(before, batch, window) if pattern.buffered else before // batch
        for n, each in enumerate(batches):
            held = round((first + n) * pattern.facts_per_batch)  # facts / entries stored so far
            for index, task in enumerate(pattern.writer_tasks):
                rate = pattern.rate(index)
                entry = out.writer.setdefault(task, [0.0, 0.0])
                entry[0] += rate
                entry[1] += rate * prompt_of(pattern, index, each, held, params, fact, backend)
        written = [m for each in batches for m in each]
        if pattern.unit == "fact":  # facts_per_batch a batch, counted over the whole stream
            joined = [" ".join(m.content for m in each) for each in batches]
            facts = round(len(batches) * pattern.facts_per_batch)
            out.texts += [joined[n % len(joined)] for n in range(facts)] if joined else []
        elif pattern.unit == "session":
            sessions: dict[str, list[str]] = {}
            for m in written:
                sessions.setdefault(m.session_id, []).append(render(m))
            out.texts += ["\n".join(texts) for texts in sessions.values()]
        else:
            out.texts += [render(m) for m in written]
    return out


def write_lines(
    writes: Writes,
    line: Callable[..., Line],
    tokens_out: Callable[[str, str], float],
    roles: Iterable[str],
    embed_backend: str,
    queries: list[str] = (),
    writer_backend: str = "offline",
) -> list[Line]:
    """The writer's lines (one per task) and the embedder's (the stored texts), and what the
    retrievals of ``queries`` cost (:func:`query_lines`), made with ``line(role, task,
    **values)``; expected counts."""
    roles = set(roles)
    out = []
    pattern = writes.pattern
    when = " once the buffer is full" if pattern.buffered else ""
    for task, (calls, known) in writes.writer.items() if "memory_writer" in roles else ():
        note = (
            f"expected: one {task} call per {writes.batch_size} message(s) written{when}; "
            "tokens in: rendered over the batch, stored facts shown as stand-ins of the writer's "
            "expected reply length"
        )
        out.append(
            line(
                "memory_writer", task, calls=calls, tokens_in=known,
                tokens_out=calls * tokens_out("memory_writer", task), exact=False, notes=[note],
            )
        )  # fmt: skip
    texts = list(writes.texts) if "embedder" in roles else []
    if texts:
        note = f"expected: one text per {pattern.unit} stored"
        out.append(
            line(
                "embedder", "embed", calls=len(texts),
                tokens_in=embedded_tokens(texts, embed_backend), exact=False, notes=[note],
            )
        )  # fmt: skip
    asked = query_lines(pattern, queries, line, tokens_out, embed_backend, writer_backend)
    return merged([*out, *asked])


def query_lines(
    pattern: WritePattern,
    queries: list[str],
    line: Callable[..., Line],
    tokens_out: Callable[[str, str], float],
    embed_backend: str,
    writer_backend: str = "offline",
) -> list[Line]:
    """What the system's retrievals cost: ``texts_per_query`` embedded texts per query (the
    query itself, and what the search embeds besides) and its ``query_tasks`` writer calls,
    each over the query."""
    if not queries:
        return []
    out = []
    for index, task in enumerate(pattern.query_tasks):
        fixed = pattern.query_prompt_tokens[index] if pattern.query_prompt_tokens else 0.0
        tokens = 0.0
        for query in queries:  # the fixed words scaled to the endpoint's count as the query's
            sent, words = text_tokens(query, writer_backend), count_tokens(query) or 1
            tokens += (fixed * (sent / words if writer_backend != "offline" else 1.0)) + sent
        out.append(
            line(
                "memory_writer", task, calls=len(queries), tokens_in=tokens,
                tokens_out=len(queries) * tokens_out("memory_writer", task), exact=False,
                notes=[f"one {task} call per retrieval: the search asks the model"],
            )
        )  # fmt: skip
    per = pattern.texts_per_query
    out.append(
        line(
            "embedder", "embed", calls=per * len(queries),
            tokens_in=per * embedded_tokens(queries, embed_backend), exact=False,
            notes=[f"{per:g} embedded text(s) per query ({len(queries)})"],
        )
    )  # fmt: skip
    return out


def merged(lines: list[Line]) -> list[Line]:
    """``lines`` with those of the same role and task summed into the first (notes joined)."""
    out: dict[tuple[str, str], Line] = {}
    for each in lines:
        kept = out.setdefault((each.role, each.task), each)
        if kept is each:
            continue
        for name in ("calls", "cache_hits", "tokens_in", "tokens_out"):
            setattr(kept, name, getattr(kept, name) + getattr(each, name))
        kept.notes += [n for n in each.notes if n not in kept.notes]
    return list(out.values())


def window_of(system_spec: Mapping[str, Any], messages: list[Message]) -> list[Message]:
    """The messages a buffered system still holds after ``messages`` (its local window, which
    its retrieval returns after the store's hits); none for an unbuffered one."""
    pattern, params = pattern_of(system_spec)
    if not pattern.buffered:
        return []
    batch = int(params.get(pattern.batch_param, 1)) if pattern.batch_param else 1
    kept = written_batches(len(messages), batch, int(params.get("local_window", 0))) * batch
    return messages[kept:]


def window_items(system_spec: Mapping[str, Any], messages: list[Message]) -> list[MemoryItem]:
    """:func:`window_of` as the items a buffered system's retrieval returns."""
    return [
        MemoryItem(id=f"window:{m.turn_id}", text=render(m), score=0.0, source_ids=[m.turn_id])
        for m in window_of(system_spec, messages)
    ]
