"""A BM25 index with two interchangeable backends.

``bm25s`` (numba-accelerated, sparse matrices) is the fast path used by default; ``rank_bm25`` is
kept as the reference implementation that most papers' baselines used. Both take pre-tokenized
documents so tokenization (and its language handling) is decided in one place by the caller.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

BACKENDS = ("bm25s", "rank_bm25")


class BM25Index:
    """Okapi BM25 over tokenized documents; ``search`` returns (indices, scores), best first."""

    def __init__(
        self,
        tokenized_docs: list[list[str]],
        backend: str = "bm25s",
        k1: float = 1.5,
        b: float = 0.75,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"bm25 backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.n_docs = len(tokenized_docs)
        # Empty documents get a placeholder token so both libraries accept them; it never matches.
        docs = [tokens or ["\x00"] for tokens in tokenized_docs]
        if self.n_docs == 0:
            self._index = None
        elif backend == "bm25s":
            import bm25s

            # Robertson's idf is rank_bm25's Okapi idf, so both backends rank alike (scores differ
            # by the constant factor k1 + 1).
            # "auto": numba (pinned) when importable; bm25s' own default would be numpy.
            self._index = bm25s.BM25(k1=k1, b=b, method="robertson", backend="auto")
            # ids in order of first occurrence, as a setdefault per token would number them
            vocab = {t: i for i, t in enumerate(dict.fromkeys(chain.from_iterable(docs)))}
            ids = [list(map(vocab.__getitem__, doc)) for doc in docs]
            self._vocab = vocab
            self._index.index(
                bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False
            )
        else:
            from rank_bm25 import BM25Okapi

            self._index = BM25Okapi(docs, k1=k1, b=b)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        """BM25 score of every document for the query."""
        if self._index is None:
            return np.zeros(0, dtype=np.float32)
        if self.backend == "bm25s":
            known = [self._vocab[t] for t in query_tokens if t in self._vocab]
            if not known:
                return np.zeros(self.n_docs, dtype=np.float32)
            return np.asarray(self._index.get_scores(known), dtype=np.float32)
        return np.asarray(self._index.get_scores(query_tokens), dtype=np.float32)

    def search(self, query_tokens: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents with a positive score; ties broken by document order."""
        scores = self.scores(query_tokens)
        if scores.size == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        order = np.lexsort((np.arange(scores.size), -scores))[:k]
        order = order[scores[order] > 0]
        return order, scores[order]
