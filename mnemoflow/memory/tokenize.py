"""Language-aware tokenization for lexical retrieval (BM25).

English (and other space-separated languages): lowercase content words from
:mod:`mnemoflow.lexical` (stop words dropped). Chinese: jieba's search-mode segmentation, because
a Chinese sentence has no spaces and single characters are poor BM25 terms; punctuation and
whitespace tokens are dropped and Latin words inside Chinese text are lowercased. jieba is
imported lazily and its dictionary is built once per process (about a second).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

from mnemoflow.lexical import STOPWORDS, terms

_HAN = re.compile(r"[\u4e00-\u9fff]")
_TOKEN = re.compile(r"[\w\u4e00-\u9fff]", re.UNICODE)

#: Common Chinese function words, dropped like English stop words.
ZH_STOPWORDS = frozenset(
    "的 了 是 在 我 你 他 她 它 们 我们 你们 他们 这 那 这个 那个 和 与 及 就 都 也 还 吗 呢 吧 啊 "
    "有 没有 不 很 会 要 对 把 被 给 让 从 到 说 一个 什么 怎么 为什么 哪 哪里 么 着 过".split()
)


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def is_chinese(text: str) -> bool:
    """True when Han characters make up at least a fifth of the text's word characters."""
    text = text or ""
    if _HAN.search(text) is None:  # most text: no Han character, no count needed
        return False
    chars = len(_TOKEN.findall(text))  # every Han character is one of these
    return len(_HAN.findall(text)) * 5 >= chars


def tokenize_zh(text: str) -> list[str]:
    """jieba search-mode tokens without punctuation, whitespace and function words."""
    out = []
    for token in _jieba().lcut_for_search(text or ""):
        token = token.strip().lower()
        if token and _TOKEN.search(token) and token not in ZH_STOPWORDS and token not in STOPWORDS:
            out.append(token)
    return out


def tokenize(text: str, lang: str = "en") -> list[str]:
    """BM25 terms of ``text``: jieba for ``lang`` "zh" (or "auto" on Chinese text), else words."""
    if lang == "zh" or (lang == "auto" and is_chinese(text)):
        return tokenize_zh(text)
    return terms(text)
