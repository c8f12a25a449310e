"""The planner's write and token model: a memory system states how it writes (WritePattern), the
planner counts batches through its buffer; replies come from the per-call-site table, an
embedder's hours from its batch size."""

from __future__ import annotations

import pytest

from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import EndpointSpec
from mnemoflow.memory import writer
from mnemoflow.memory.base import Message, resolve
from mnemoflow.memory.buffer import MessageBuffer
from mnemoflow.planning.plan import requests
from mnemoflow.planning.tokens import embedded_tokens, expected_reply, reply_table, sent_tokens
from mnemoflow.planning.writes import planned_writes, window_of, written_batches


def messages(n: int, session: str = "s") -> list[Message]:
    return [Message(f"{session}_{i}", session, "user", f"message number {i}") for i in range(n)]


def test_buffered_batches_match_the_buffer_itself():
    """(update_batch 2, local_window 4): what MessageBuffer.push writes, counted in advance."""
    buffer, written = MessageBuffer(2, 4), 0
    for n in range(1, 30):
        written += len(buffer.push(messages(1, f"x{n}")))
        assert written_batches(n, 2, 4) == written, n


def test_systems_state_their_writer_calls_and_units():
    assert resolve("agentic_external").write_pattern.writer_tasks == (
        writer.EXTRACT_FACTS,
        writer.UPDATE_FACTS,
    )
    assert resolve("rag").write_pattern.writer_tasks == ()
    assert resolve("bm25_session").granularity == "session"
    dense = resolve("dense_session")
    assert dense.write_pattern_for({"pooling": "document"}).unit == "session"
    assert dense.write_pattern_for({"pooling": "max"}).unit == "message"
    incontext = resolve("agentic_incontext")
    assert incontext.write_pattern_for({"prompt": "kv"}).writer_tasks == (writer.KV_UPDATE,)


def test_planned_writes_follow_the_buffer_across_steps():
    spec = {"type": "agentic_external", "update_batch": 2, "local_window": 4}
    stream = messages(10)
    step0 = planned_writes(spec, [(stream[:6], 0)], "offline")
    step1 = planned_writes(spec, [(stream, 6)], "offline")
    # 6 messages: one batch leaves the buffer; 10: three in all, so two more in step 1
    assert step0.writer[writer.EXTRACT_FACTS][0] == 1
    assert step1.writer[writer.UPDATE_FACTS][0] == 2
    assert len(step1.texts) == 2  # one fact per written batch is embedded
    rag = planned_writes({"type": "rag"}, [(stream, 0)], "offline")
    assert not rag.writer and len(rag.texts) == 6  # three batches of two messages, no writer
    assert [m.turn_id for m in window_of({"type": "rag"}, stream)] == ["s_6", "s_7", "s_8", "s_9"]
    dense = planned_writes({"type": "dense_message"}, [(stream, 4)], "offline")
    assert len(dense.texts) == 6  # unbuffered: every new message


def test_replies_come_from_the_table_never_max_tokens():
    sites = reply_table()
    assert all(entry["source"] for entry in sites.values())
    assert expected_reply("judge", "judge_qa", "openai") == sites["judge/*"]["model"]
    assert expected_reply("agent", "answer", "offline") == sites["agent/answer"]["offline"]


def test_tokens_as_each_endpoint_reports_them():
    prompt = [{"role": "user", "content": "one two three"}]
    assert sent_tokens(prompt, "offline") == 4  # the offline model: words x 1.3 + 1, no overhead
    assert sent_tokens(prompt, "openai") > 3  # o200k plus the chat format's overhead
    assert embedded_tokens(["one two three"], "sentence_transformers") == 0
    assert embedded_tokens(["one two three"], "openai") == 3


@pytest.mark.parametrize("backend", ["openai", "sentence_transformers"])
def test_an_embedder_endpoint_gets_one_request_per_batch(backend):
    spec = EndpointSpec(role="embedder", backend=backend)
    n = 3 * OpenAIBackend.embed_batch + 1
    assert requests("embedder", spec, n) == (4 if backend == "openai" else n)
    assert requests("agent", EndpointSpec(role="agent", backend="openai"), 5) == 5


def test_every_registered_system_states_its_write_pattern():
    """The planner asks each system class, products included (whose instances keep their own
    ``writes()`` stats), for its pattern with its defaults."""
    import mnemoflow.memory.systems  # noqa: F401  (registers every system and product)
    from mnemoflow.memory.base import SYSTEMS, WritePattern

    names = SYSTEMS.names()
    assert "mem0_paper" in names and "dense_message" in names
    for name in names:
        cls = SYSTEMS.get(name)
        assert isinstance(cls.write_pattern_for(dict(cls.defaults)), WritePattern), name


def test_a_product_states_its_call_rates_prompts_and_searches():
    """Mem0-G over 14 messages in batches of 2: mem0's extraction every batch and its update in
    5 of 7, the graph's three calls every batch, 38 texts embedded; a search asks the query's
    entities and embeds 2 texts. Prompts: the product's fixed words and the batch's text."""
    from mnemoflow.lexical import count_tokens
    from mnemoflow.memory.buffer import render
    from mnemoflow.planning.plan import Line
    from mnemoflow.planning.writes import pattern_of, query_lines

    spec = {"type": "mem0_graph", "update_batch": 2}
    messages = [Message(f"t{n}", "s", "user", f"message number {n} here") for n in range(14)]
    writes = planned_writes(spec, [(messages, 0)], "offline")
    calls = {task: round(calls, 6) for task, (calls, _) in writes.writer.items()}
    assert calls == {
        "mem0_extract_facts": 7,
        "mem0_update_memory": 5,
        "mem0_graph_entities": 7,
        "mem0_graph_relations": 7,
        "mem0_graph_deletions": 7,
    }
    assert len(writes.texts) == 38
    batch_words = count_tokens("\n".join(render(m) for m in messages[:2]))
    assert writes.writer["mem0_extract_facts"][1] == pytest.approx(7 * (836 + batch_words))
    assert writes.writer["mem0_update_memory"][1] == pytest.approx(5 * 1094)

    def line(role, task, **values):
        return Line("b", "mem0_graph", "qa", role, task, **values)

    pattern = pattern_of(spec)[0]
    asked = query_lines(pattern, ["Where is it?"] * 5, line, lambda role, task: 1.0, "offline")
    found = {(x.role, x.task): x for x in asked}
    assert found[("memory_writer", "mem0_graph_entities")].calls == 5
    assert found[("memory_writer", "mem0_graph_entities")].tokens_in == 5 * (
        71 + count_tokens("Where is it?")
    )
    assert found[("embedder", "embed")].calls == 10
