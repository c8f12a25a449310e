"""Word-level text processing shared by the offline backend, BM25 memories and token budgets.

Deliberately simple and language-light: lowercase word tokens, an English stop-word list, and
CJK characters as single tokens so Chinese text is not one giant token. Memory systems that need
better segmentation (jieba) or a model tokenizer bring their own.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[\u4e00-\u9fff]|[a-z0-9]+(?:'[a-z]+)?", re.IGNORECASE)

STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being am
    do does did doing have has had having i me my mine myself we our ours you your yours he him his
    she her hers it its they them their theirs this that these those what which who whom whose when
    where why how all any both each few more most other some such no nor not only own same so than
    too very can will just should now would could there here about into over after before again
    further then once up down out off also s t d ll m re ve y o let lets please tell know
    think""".split()
)


def words(text: str) -> list[str]:
    """Lowercase word tokens, stop words kept (for token counts and exact matching)."""
    text = text or ""
    if text.isascii():  # lowercasing ASCII moves no match: one pass in C
        return _WORD.findall(text.lower())
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """Lowercase word tokens without stop words (for overlap and BM25 scoring)."""
    return [w for w in words(text) if w not in STOPWORDS]


def terms(text: str) -> list[str]:
    """Content words with the possessive 's removed ("cat's" matches "cat"): retrieval terms."""
    return [w.removesuffix("'s") for w in words(text) if w not in STOPWORDS]


def count_tokens(text: str) -> int:
    """Approximate model tokens: words plus punctuation, about 1.3 per English word.

    Used for context budgets when no model tokenizer is configured; budgets are therefore
    approximate, and reports say so.
    """
    n_words = len(_WORD.findall(text or ""))
    return int(n_words * 1.3) + 1 if text else 0


_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")


def sentences(text: str) -> list[str]:
    """Split text into sentences (for extractive reading and fact extraction)."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    from nltk.stem import PorterStemmer  # no data download needed for the stemmer

    return _STEMMER.setdefault("porter", PorterStemmer()).stem(word)


_STEMMER: dict[str, object] = {}


def stems(text: str) -> list[str]:
    """Porter stems of the content words ("researching" and "research" match)."""
    return [_stem(w) for w in terms(text)]
