"""The embedder role: content-addressed cache counts, and the bundled offline MiniLM model."""

from __future__ import annotations

import numpy as np
import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.types import BUNDLED_EMBEDDER, EndpointSpec
from mnemoflow.memory.base import Message, build
from tests.memory_support import gateway, run


def _haystack(n_sessions: int, shared: int) -> dict[str, list[Message]]:
    """Two questions' haystacks sharing ``shared`` sessions (as LongMemEval's do)."""
    sessions = {
        f"s{i}": [
            Message(f"s{i}_t{t}", f"s{i}", "user", f"session {i} turn {t} about topic {i * t}")
            for t in range(4)
        ]
        for i in range(n_sessions)
    }
    first = [m for i in range(0, shared + 3) for m in sessions[f"s{i}"]]
    second = [m for i in range(3, n_sessions) for m in sessions[f"s{i}"]]
    return {"q1": first, "q2": second}


def _computed(llm) -> int:
    entry = llm.ledger.entries["embedder/embed"]
    return entry.calls - entry.cache_hits


def test_each_distinct_text_is_embedded_once_across_questions_and_reruns(tmp_path):
    """q1 reads sessions 0-7, q2 sessions 3-9: 10 sessions x 4 turns = 40 distinct texts."""
    haystacks = _haystack(10, shared=5)
    cache = tmp_path / "cache.sqlite"
    llm = gateway(cache)
    for spec in ({"type": "dense_message"}, {"type": "dense_session"}):
        for question, turns in haystacks.items():
            system = build(spec, llm=llm)
            run(system.add(turns))
            run(system.retrieve(f"topic of {question}"))
    # 40 turn texts + 2 distinct queries; dense_session (max pooling) reuses every vector.
    assert _computed(llm) == 42
    assert llm.ledger.entries["embedder/embed"].calls == (32 + 1 + 28 + 1) * 2
    llm.close()
    rerun = gateway(cache)  # another job, same cache file: nothing is computed again
    system = build({"type": "dense_message"}, llm=rerun)
    run(system.add(haystacks["q1"] + haystacks["q2"]))
    # One memory holding both haystacks stores each of the 40 turns once, all from the cache.
    assert _computed(rerun) == 0 and rerun.ledger.entries["embedder/embed"].cache_hits == 40


def test_sentence_transformers_binding():
    spec = EndpointSpec.from_config("embedder", {"backend": "sentence_transformers"})
    assert (spec.backend, spec.model) == ("sentence_transformers", BUNDLED_EMBEDDER)
    with pytest.raises(ConfigError, match="models.agent.backend"):
        EndpointSpec.from_config("agent", {"backend": "sentence_transformers"})
    llm = gateway(embedder={"backend": "sentence_transformers", "model": "/nonexistent/model"})
    with pytest.raises(ConfigError, match="models.embedder.model"):
        llm.backend("embedder")


@pytest.mark.slow
def test_bundled_minilm_embeds_offline_and_by_meaning(tmp_path, monkeypatch):
    """all-MiniLM-L6-v2: 384 dimensions, unit norm, paraphrases closer than unrelated text."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    llm = gateway(tmp_path / "cache.sqlite", {"backend": "sentence_transformers"})
    texts = [
        "What is my favorite color?",
        "The colour I like best is teal.",
        "I fixed the leaky faucet in the kitchen.",
    ]
    vectors = run(llm.embed(texts))
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.2
    again = run(llm.embed(texts[::-1]))
    np.testing.assert_array_equal(again, vectors[::-1])
    assert _computed(llm) == 3
