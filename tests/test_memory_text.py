"""Token budgets, Chinese tokenization, BM25 backend agreement, and the offline memory writer."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from mnemoflow.llm.offline import HANDLERS, _load_handlers
from mnemoflow.memory.tokenize import is_chinese, tokenize
from mnemoflow.memory.tokens import count_tokens, encode, truncate_newest

# --- token counts: ids identical to tiktoken's, no download -----------------------------------


def test_o200k_and_cl100k_ids_match_tiktoken():
    assert encode("hello world") == [24912, 2375]  # o200k_base (GPT-4o)
    assert encode("hello world", "cl100k_base") == [15339, 1917]  # GPT-4 / GPT-3.5
    fox = "The quick brown fox jumps over the lazy dog."
    assert encode(fox, "cl100k_base") == [791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 13]
    assert count_tokens(fox) == 10
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") == 7  # special-token text is ordinary text in a history


def test_truncate_newest_keeps_the_newest_texts_that_fit():
    texts = ["hello world", "The quick brown fox jumps over the lazy dog.", "hi"]  # 2, 10, 1
    assert truncate_newest(texts, 13) == 0
    assert truncate_newest(texts, 12) == 1
    assert truncate_newest(texts, 10) == 2
    assert truncate_newest(texts, 0) == 3
    assert truncate_newest(texts, 57) == 0  # 57 bytes in all: fits without tokenizing
    assert truncate_newest(["é" * 30], 30) == 0  # 60 bytes, but 30 o200k tokens or fewer


# --- jieba for Chinese ------------------------------------------------------------------------


def test_chinese_is_segmented_with_jieba_search_mode():
    assert tokenize("我最喜欢的颜色是蓝绿色。", "zh") == [
        "最",
        "喜欢",
        "颜色",
        "蓝绿",
        "绿色",
        "蓝绿色",
    ]
    assert tokenize("我住在里斯本，养了一只狗。", "zh") == [
        "住",
        "里斯",
        "里斯本",
        "养",
        "一只",
        "狗",
    ]
    assert tokenize("My favorite color is teal.", "en") == ["favorite", "color", "teal"]
    assert is_chinese("我住在里斯本 Lisbon") and not is_chinese("I live in 里 Lisbon")
    assert tokenize("我住在里斯本", "auto") == ["住", "里斯", "里斯本"]


# --- bm25s and rank_bm25 rank the same where their idf formulas agree --------------------------

DOCS = [["a", "b", "c"], ["a", "d"], ["e", "f", "g", "h"], ["b", "x"], ["y", "z"], ["q", "r", "s"]]


def _random_corpus(seed: int = 0):
    """40 documents over 60 terms: every term occurs in fewer than half of the documents, so
    Robertson's idf log((N - n + 0.5) / (n + 0.5)) is positive and rank_bm25's epsilon floor for
    negative idf never applies."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)]
    docs = [[rng.choice(vocab) for _ in range(rng.randint(3, 12))] for _ in range(40)]
    queries = [rng.sample(vocab, 3) for _ in range(100)]
    return docs, queries


def _bm25s_scores(docs, method):
    import bm25s

    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in docs]
    index = bm25s.BM25(k1=1.5, b=0.75, method=method)
    index.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
    return lambda query: np.asarray(index.get_scores([vocab[t] for t in query if t in vocab]))


def test_okapi_worked_example_and_bm25s_robertson_agree():
    """Query "a" on DOCS: idf = ln((6 - 2 + 0.5) / (2 + 0.5)) = 0.5878; document 0 (3 terms,
    average length 16/6) scores 0.5878 * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3 / 2.667)) = 0.5565.
    bm25s's "robertson" drops the constant (k1 + 1) factor: same ranking, scores / 2.5."""
    from rank_bm25 import BM25Okapi

    okapi = BM25Okapi(DOCS, k1=1.5, b=0.75)
    assert okapi.idf["a"] == pytest.approx(math.log(4.5 / 2.5))
    assert okapi.get_scores(["a"])[:2] == pytest.approx([0.5565, 0.6623], abs=1e-4)
    robertson = _bm25s_scores(DOCS, "robertson")
    assert robertson(["a"])[:2] * 2.5 == pytest.approx([0.5565, 0.6623], abs=1e-4)
    docs, queries = _random_corpus()
    okapi, robertson = BM25Okapi(docs, k1=1.5, b=0.75), _bm25s_scores(docs, "robertson")
    for query in queries:
        np.testing.assert_allclose(robertson(query) * 2.5, okapi.get_scores(query), atol=1e-5)


def test_bm25_index_backends_rank_identically():
    """The BM25Index helper must give the same top-10 with either backend on this corpus.

    This holds when its bm25s backend uses Robertson's idf (method="robertson"); Lucene's idf
    log(1 + (N - n + 0.5) / (n + 0.5)) weights rare and common terms differently and reorders
    multi-term queries.
    """
    from mnemoflow.memory import bm25_index  # in-repo: an import error is a failure, not a skip

    docs, queries = _random_corpus()
    fast = bm25_index.BM25Index(docs, backend="bm25s")
    reference = bm25_index.BM25Index(docs, backend="rank_bm25")
    for query in queries:
        fast_ids, _ = fast.search(query, 10)
        ref_ids, _ = reference.search(query, 10)
        assert list(fast_ids) == list(ref_ids), query


# --- offline memory writer: worked examples ----------------------------------------------------


def _call(task: str, fields: dict) -> dict:
    _load_handlers()
    return json.loads(HANDLERS[task](fields))


def _records(*lines: str, speaker: str = "user") -> list[dict]:
    return [
        {"n": n, "speaker": speaker, "role": "user", "time": "", "content": text}
        for n, text in enumerate(lines, start=1)
    ]


def test_offline_fact_extraction():
    reply = _call(
        "memory_extract_facts",
        {
            "messages": _records(
                "Can you give me tips? My sister's favorite color is red, funny enough.",
                "Thanks for the tips.",
                "Just so you know, my home city is Osaka. Is that far?",
                "I should mention that my pet's name is Mochi.",
            )
        },
    )
    assert reply == {
        "facts": [
            {"text": "User's sister's favorite color is red, funny enough.", "from": [1]},
            {"text": "User's home city is Osaka.", "from": [3]},
            {"text": "User's pet's name is Mochi.", "from": [4]},
        ]
    }


def test_offline_update_decisions():
    memories = [
        {"id": "0", "text": "User's favorite color is teal."},
        {"id": "1", "text": "User's sister's favorite color is red."},
        {"id": "2", "text": "User's home city is Osaka."},
        {"id": "3", "text": "User's car model is Civic."},
    ]
    facts = [
        "User's favorite color has changed to crimson.",  # same subject, new value
        "User's home city is Osaka these days.",  # same subject and value
        "User's pet's name is Mochi.",  # new subject
        "User no longer drives the Civic.",  # negates memory 3 through its value
    ]
    reply = _call(
        "memory_update_facts", {"facts": [{"text": f} for f in facts], "memories": memories}
    )
    assert reply["memory"] == [
        {"event": "UPDATE", "id": "0", "text": facts[0], "fact": 0},
        {"event": "NONE", "id": "2", "fact": 1},
        {"event": "ADD", "text": facts[2], "fact": 2},
        {"event": "DELETE", "id": "3", "fact": 3},
    ]


def test_offline_kv_update_merges_into_existing_keys():
    reply = _call(
        "memory_kv_update",
        {
            "memory": [{"key": "user's favorite color", "value": "teal", "time": "t"}],
            "messages": _records(
                "Things changed, my favorite color is crimson these days.",
                "My roommate told me their job title is pilot.",
            ),
        },
    )
    assert reply == {
        "set": [
            {"key": "user's favorite color", "value": "crimson", "from": [1]},
            {"key": "user's roommate told user job title", "value": "pilot", "from": [2]},
        ],
        "delete": [],
    }


def test_offline_note_keywords():
    reply = _call(
        "memory_note",
        {"content": "I adopted a puppy named Biscuit last weekend.", "speaker": "Mel", "time": ""},
    )
    assert reply == {
        "keywords": ["adopted", "puppy", "named", "biscuit", "weekend"],
        "tags": ["personal-fact"],
        "context": "Mel says: I adopted a puppy named Biscuit last weekend.",
    }


def test_offline_kv_update_deletes_negated_entries():
    reply = _call(
        "memory_kv_update",
        {
            "memory": [
                {"key": "user's weekend sport", "value": "tennis", "time": "t"},
                {"key": "user's home city", "value": "Osaka", "time": "t"},
            ],
            "messages": _records("I don't play tennis anymore."),
        },
    )
    assert reply == {"set": [], "delete": ["user's weekend sport"]}
