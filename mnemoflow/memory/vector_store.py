"""Stored memory items with embeddings and an exact FAISS inner-product index.

Every dense-retrieving system (dense_*, rag, agentic_external, notes_linked, tiered) keeps its items
here: text, the unified turn ids the item came from, the conversation time, free-form ``extra``
fields, and one L2-normalized vector per item. Search is exact (``IndexFlatIP``): at memory sizes
of a few thousand items per episode an approximate index saves nothing and would make results
depend on training. Vectors are saved as ``.npy`` next to the items, so a loaded snapshot answers
exactly like the one that was saved, without calling the embedder again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.memory.base import MemoryItem, Message
from mnemoflow.memory.buffer import render
from mnemoflow.memory.tokens import count_tokens


@dataclass
class StoredItem:
    id: str
    text: str
    source_ids: list[str] = field(default_factory=list)
    time: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class VectorStore:
    """Items in insertion order plus their vectors; ids are unique."""

    def __init__(self) -> None:
        self.items: list[StoredItem] = []
        self._vectors: np.ndarray | None = None  # (n, d) float32, row i <-> items[i]
        self._index: Any = None  # faiss index, rebuilt lazily after changes
        self._position: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def source_ids(self) -> set[str]:
        """Every turn id some stored item came from (what the store holds, for diagnosis)."""
        return {s for item in self.items for s in item.source_ids}

    def __contains__(self, item_id: str) -> bool:
        return item_id in self._position

    def position(self, item_id: str) -> int:
        """Insertion rank of an item (older items have smaller positions)."""
        return self._position[item_id]

    def get(self, item_id: str) -> StoredItem:
        return self.items[self._position[item_id]]

    def vector(self, item_id: str) -> np.ndarray:
        assert self._vectors is not None
        return self._vectors[self._position[item_id]]

    def add(self, items: list[StoredItem], vectors: np.ndarray) -> None:
        if not items:
            return
        vectors = normalize(vectors)
        if len(items) != len(vectors):
            raise ValueError(f"{len(items)} items but {len(vectors)} vectors")
        for item in items:
            if item.id in self._position:
                raise ValueError(f"duplicate memory item id {item.id!r}")
            self._position[item.id] = len(self.items)
            self.items.append(item)
        self._vectors = vectors if self._vectors is None else np.vstack([self._vectors, vectors])
        self._index = None

    def replace(self, item: StoredItem, vector: np.ndarray | None = None) -> None:
        """Overwrite an item in place (same id, same position); a new vector if given."""
        position = self._position[item.id]
        self.items[position] = item
        if vector is not None:
            assert self._vectors is not None
            self._vectors[position] = normalize(vector)[0]
            self._index = None

    def remove(self, item_id: str) -> StoredItem:
        position = self._position.pop(item_id)
        removed = self.items.pop(position)
        assert self._vectors is not None
        self._vectors = np.delete(self._vectors, position, axis=0)
        self._position = {item.id: i for i, item in enumerate(self.items)}
        self._index = None
        return removed

    def search(self, query: np.ndarray, k: int) -> list[tuple[StoredItem, float]]:
        """The ``k`` items with the largest inner product with ``query``. Scores equal to 6
        decimals tie, and ties go to the older item, at the cut-off too: FAISS is asked for more
        hits until the k-th hit's whole tie group is in hand, so which of two tied items makes
        the top ``k`` never depends on the index's own order."""
        if not self.items or k <= 0:
            return []
        import faiss

        if self._index is None:
            assert self._vectors is not None
            self._index = faiss.IndexFlatIP(self._vectors.shape[1])
            self._index.add(np.ascontiguousarray(self._vectors))
        k, fetch, query = min(k, len(self.items)), min(k, len(self.items)), normalize(query)
        while True:
            scores, positions = self._index.search(query, fetch)
            hits = zip(scores[0].tolist(), positions[0].tolist(), strict=True)
            pairs = sorted(((round(s, 6), s, p) for s, p in hits if p >= 0), key=_tie_order)
            if fetch == len(self.items) or pairs[-1][0] < pairs[k - 1][0]:
                break
            fetch = min(2 * fetch + 1, len(self.items))
        return [(self.items[p], s) for _, s, p in pairs[:k]]

    def save(self, directory: Path, name: str = "items") -> None:
        with open(directory / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for item in self.items:
                handle.write(json.dumps(asdict(item), ensure_ascii=False) + "\n")
        vectors = self._vectors if self._vectors is not None else np.zeros((0, 0), np.float32)
        np.save(directory / f"{name}.npy", vectors, allow_pickle=False)

    def load(self, directory: Path, name: str = "items") -> None:
        with open(directory / f"{name}.jsonl", encoding="utf-8") as handle:
            self.items = [StoredItem(**json.loads(line)) for line in handle if line.strip()]
        vectors = np.load(directory / f"{name}.npy", allow_pickle=False)
        self._vectors = vectors.astype(np.float32) if len(self.items) else None
        self._position = {item.id: i for i, item in enumerate(self.items)}
        self._index = None


def _tie_order(pair: tuple[float, float, int]) -> tuple[float, int]:
    """Best (rounded) score first; equal scores: the older item (smaller position) first."""
    return (-pair[0], pair[2])


async def embed(llm: Any, texts: list[str]) -> np.ndarray:
    """Normalized embeddings from the gateway's ``embedder`` role (cached per distinct text)."""
    if llm is None:
        raise ValueError("this memory system needs a model gateway (llm) for embeddings")
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return normalize(await llm.embed(list(texts)))


async def search_memory(store: VectorStore, llm: Any, query: str, k: int) -> list[MemoryItem]:
    """The ``k`` stored items nearest to ``query`` as retrieval results (none when empty)."""
    if not len(store):
        return []
    hits = store.search(await embed(llm, [query]), k)
    return [MemoryItem(i.id, i.text, score, list(i.source_ids), i.time) for i, score in hits]


def unseen_messages(messages: list[Message], store: VectorStore) -> list[Message]:
    """The non-empty messages the store does not hold yet, once per turn id: what a system that
    stores one item per message still has to write (a later step may resend a turn)."""
    new = [m for m in messages if m.content.strip() and m.turn_id not in store]
    return list({m.turn_id: m for m in new}.values())


async def store_messages(store: VectorStore, llm: Any, messages: list[Message]) -> int:
    """Embed and store each message as an item of its own (id: its turn id, text: the rendered
    message); returns the tokens written."""
    vectors = await embed(llm, [render(m) for m in messages])
    items = [
        StoredItem(id=m.turn_id, text=render(m), source_ids=[m.turn_id], time=m.time)
        for m in messages
    ]
    store.add(items, vectors)
    return sum(count_tokens(item.text) for item in items)
