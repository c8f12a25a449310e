"""Retrieval quality: evidence recall@k well above a random ranking; updated facts answered newest.

Fast tests use the offline hashed embedding (a lexical stand-in for a dense model); the ``slow``
ones run the bundled all-MiniLM-L6-v2 on the synthetic benchmark and the real LoCoMo file.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mnemoflow.data.registry import Prepared, load_benchmark
from mnemoflow.llm.offline import HANDLERS, _load_handlers
from mnemoflow.memory.base import build
from tests.memory_support import gateway, messages, recall_by_step, run, synthetic
from tests.shared_data import shared_file

MINILM = {"backend": "sentence_transformers"}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def haystack() -> Prepared:
    """3 users x 16 sessions x 8 turns, hard negatives in 30% of filler turns."""
    return synthetic(users=3, periods=2, sessions_per_period=8, turns_per_session=8, seed=11)


@pytest.mark.parametrize(
    "spec, unit, k",
    [
        ({"type": "dense_message"}, "message", 5),
        ({"type": "dense_session"}, "session", 2),
        ({"type": "bm25_message"}, "message", 5),
        ({"type": "bm25_session"}, "session", 2),
    ],
)
def test_recall_on_synthetic_beats_random(spec, unit, k, haystack):
    recalls, randoms, _ = run(recall_by_step(spec, haystack, gateway(), k=k, unit=unit))
    assert len(recalls) == 3 * 2 * 5
    assert _mean(recalls) >= 0.8 and _mean(recalls) > 4 * _mean(randoms)


# --- LoCoMo ---------------------------------------------------------------------------------


def locomo(limit: int | None = None) -> SimpleNamespace:
    """The real LoCoMo file through the project's loader (the first ``limit`` conversations)."""
    path = shared_file("locomo", "locomo10.json")  # absent folder: skip; absent file: fail
    prepared = load_benchmark({"loader": "locomo", "source": {"path": str(path)}})
    if limit:
        keep = sorted(prepared.sessions.episode_id.unique())[:limit]
        prepared = SimpleNamespace(
            sessions=prepared.sessions[prepared.sessions.episode_id.isin(keep)],
            questions=prepared.questions[prepared.questions.episode_id.isin(keep)],
        )
    return prepared


@pytest.mark.parametrize(
    "spec, unit, k",
    [({"type": "bm25_message"}, "message", 10), ({"type": "bm25_session"}, "session", 3)],
)
def test_bm25_recall_on_locomo_beats_random(spec, unit, k, capsys):
    recalls, randoms, _ = run(recall_by_step(spec, locomo(), gateway(), k=k, unit=unit))
    with capsys.disabled():
        print(
            f"\nLoCoMo {spec['type']} recall@{k}: {_mean(recalls):.3f} "
            f"(random {_mean(randoms):.3f}, {len(recalls)} questions)"
        )
    assert len(recalls) > 1900
    assert _mean(recalls) > 3 * _mean(randoms)


def test_dense_recall_on_locomo_beats_random():
    recalls, randoms, _ = run(
        recall_by_step({"type": "dense_message"}, locomo(limit=2), gateway(), k=10)
    )
    assert len(recalls) > 200
    # Hashed bag-of-words vectors: recall@10 0.33 on two conversations, random 0.025.
    assert _mean(recalls) > 10 * _mean(randoms)


@pytest.fixture(scope="module")
def minilm_cache(tmp_path_factory):
    """One embedding cache for the MiniLM tests: ``dense_session`` (max pooling) scores sessions
    by their messages' vectors, so it reads the ones ``dense_message`` computed instead of
    encoding all of LoCoMo's turns a second time (the vectors are the same either way)."""
    return tmp_path_factory.mktemp("minilm") / "cache.sqlite"


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["message", "session"])
def test_minilm_recall_on_locomo(unit, minilm_cache, capsys):
    spec = {"type": "dense_message" if unit == "message" else "dense_session"}
    k = 10 if unit == "message" else 3
    llm = gateway(minilm_cache, MINILM)
    recalls, randoms, _ = run(recall_by_step(spec, locomo(), llm, k=k, unit=unit))
    with capsys.disabled():
        print(
            f"\nLoCoMo {spec['type']} MiniLM recall@{k}: {_mean(recalls):.3f} "
            f"(random {_mean(randoms):.3f}, {len(recalls)} questions)"
        )
    assert _mean(recalls) > 3 * _mean(randoms)


@pytest.mark.slow
def test_minilm_recall_on_synthetic(haystack, tmp_path, capsys):
    llm = gateway(tmp_path / "cache.sqlite", MINILM)
    recalls, randoms, _ = run(recall_by_step({"type": "dense_message"}, haystack, llm, k=5))
    with capsys.disabled():
        print(
            f"\nsynthetic dense_message MiniLM recall@5: {_mean(recalls):.3f} "
            f"(random {_mean(randoms):.3f})"
        )
    assert _mean(recalls) > 4 * _mean(randoms)


# --- updated facts: agentic memories answer with the newest value -----------------------------


def newest_value_rate(spec: dict, prepared: Prepared) -> tuple[float, int]:
    """Share of updated-fact questions whose offline answer is the newest value.

    Memory items reach the offline reader in conversation-time order, as the generic reader
    presents them; the reader answers with the multiple-choice option its best sentence names.
    """
    _load_handlers()
    llm = gateway()
    sessions, questions = prepared.sessions, prepared.questions
    correct = total = 0
    for episode in sorted(sessions.episode_id.unique()):
        system = build(spec, llm=llm, seed=0)
        turns = sessions[sessions.episode_id == episode].sort_values(
            ["session_index", "turn_index"]
        )
        mine = questions[
            (questions.episode_id == episode) & (questions.question_type == "updated-fact")
        ]
        for step in sorted(turns.step.unique()):
            run(system.add(messages(turns[turns.step == step])))
            for q in mine[mine.checkpoint == step].itertuples(index=False):
                items = sorted(run(system.retrieve(q.question)), key=lambda i: i.time or "")
                fields = {
                    "question": q.question,
                    "context": [{"text": i.text, "time": i.time} for i in items],
                    "options": list(q.options),
                }
                correct += HANDLERS["answer"](fields) == q.answer
                total += 1
    return correct / total, total


def test_agentic_memories_answer_updated_facts_with_the_newest_value():
    prepared = synthetic(
        users=6,
        periods=3,
        sessions_per_period=4,
        turns_per_session=8,
        updates_per_period=3,
        seed=5,
    )
    # top_k 2: old and new statements of an attribute tie for a raw-message store, so only a
    # memory that replaced the old value reliably puts the new one in front of the reader.
    buffer = {"update_batch": 2, "local_window": 2, "top_k": 2}
    rates = {
        name: newest_value_rate({"type": name, **params}, prepared)
        for name, params in [
            ("rag", buffer),
            ("agentic_external", buffer),
            ("agentic_incontext", {"update_batch": 2, "local_window": 2}),
            ("notes_linked", {"top_k": 2}),
            ("tiered", {"top_k": 2}),
        ]
    }
    assert rates["rag"][1] >= 20
    # Measured 2026-11-23 (of 42): rag 0.74, agentic_external 1.00, agentic_incontext 0.90,
    # notes_linked 0.83, tiered 0.90.
    for name in ("agentic_external", "agentic_incontext", "notes_linked", "tiered"):
        assert rates[name][0] >= rates["rag"][0] + 0.05, (name, rates)
