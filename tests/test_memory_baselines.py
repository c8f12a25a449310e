import asyncio

import pytest

from mnemoflow.data.registry import load_benchmark
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import Message, available, build, resolve
from mnemoflow.memory.bm25_index import BM25Index
from mnemoflow.protocols.static_qa import episode_batch

SYSTEMS = {
    "none": {"type": "none"},
    "full_context": {"type": "full_context", "max_tokens": 60},
    "bm25_message": {"type": "bm25_message", "top_k": 3},
    "bm25_session": {"type": "bm25_session", "top_k": 1},
}


def _messages():
    prepared = load_benchmark({"loader": "synthetic", "params": {"users": 1, "periods": 2}})
    batches = [
        episode_batch(prepared.sessions, prepared.episode_sessions, "u000", step) for step in (0, 1)
    ]
    return batches, prepared.questions


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_add_save_load_retrieve_round_trip(name, tmp_path):
    (batch0, batch1), questions = _messages()

    async def run():
        memory = build(SYSTEMS[name], llm=Gateway.from_config({}, None))
        await memory.add(batch0)
        memory.save(tmp_path)
        restored = build(SYSTEMS[name], llm=Gateway.from_config({}, None))
        restored.load(tmp_path)
        await memory.add(batch1)
        await restored.add(batch1)
        for question in questions.question:
            assert await memory.retrieve(question) == await restored.retrieve(question)
        return memory

    memory = asyncio.run(run())
    stored = memory.stored_ids()
    assert stored == (set() if name == "none" else {m.turn_id for m in batch0 + batch1})


def test_full_context_keeps_the_newest_messages_within_budget():
    from mnemoflow.memory.message_store import render
    from mnemoflow.memory.tokens import count_tokens

    messages = [Message(f"t{i}", "s", "user", f"message number {i} " * 5) for i in range(10)]
    budget = sum(count_tokens(render(m)) for m in messages[-2:])  # room for exactly two
    memory = build({"type": "full_context", "max_tokens": budget})
    asyncio.run(memory.add(messages))
    items = asyncio.run(memory.retrieve("anything"))
    assert [i.id for i in items] == ["t8", "t9"], "newest kept, in chronological order"


def test_bm25_retrieves_the_matching_message_first_and_links_sources():
    messages = [
        Message("a", "s1", "user", "I adopted a cat named Mochi."),
        Message("b", "s1", "assistant", "Lovely!"),
        Message("c", "s2", "user", "The weather is rainy today."),
        Message("d", "s3", "user", "My sister bought a new bike."),
        Message("e", "s4", "user", "Dinner was lentil soup."),
    ]
    for spec, top_sources in (
        ({"type": "bm25_message"}, ["a"]),
        ({"type": "bm25_session"}, ["a", "b"]),
    ):
        memory = build(spec)
        asyncio.run(memory.add(messages))
        items = asyncio.run(memory.retrieve("What is my cat's name?"))
        assert items[0].source_ids == top_sources


@pytest.mark.parametrize("backend", ["bm25s", "rank_bm25"])
def test_bm25_index_backends_score_the_textbook_example(backend):
    docs = [["apple", "pie"], ["apple"], ["banana"], ["cherry", "tart"], ["grape"]]
    index = BM25Index(docs, backend=backend)
    order, scores = index.search(["apple", "pie"], 5)
    assert order.tolist() == [0, 1] and scores[0] > scores[1] > 0


def test_bm25s_runs_on_its_numba_backend():
    """numba is pinned, so the fast path must not fall back to bm25s' default numpy backend.

    No import-skip: a missing pinned package is a broken environment, and this test must say so.
    """
    index = BM25Index([["apple", "pie"], ["banana"], ["cherry"]], backend="bm25s")
    assert index._index.backend == "numba"
    assert index.search(["apple"], 2)[0].tolist() == [0]


def test_unknown_system_and_parameter_are_config_errors():
    with pytest.raises(ConfigError, match="unknown memory system 'nope'"):
        resolve("nope")
    with pytest.raises(ConfigError, match="unknown parameters \\['topk'\\]"):
        build({"type": "bm25_message", "topk": 3})
    assert {"none", "full_context", "bm25_message", "bm25_session"} <= set(available())


def test_class_path_registration():
    cls = resolve("mnemoflow.memory.systems.none:NoMemory")
    assert cls.name == "none"
