"""Token counts for context budgets, with a real BPE tokenizer that works offline.

``full_context`` truncates a history to a token budget, and LongMemEval / LoCoMo report context
lengths in model tokens, so budgets are counted with OpenAI's ``o200k_base`` encoding (GPT-4o
family) rather than a word estimate. The encodings ship inside the ``bpe-openai`` package (token
ids identical to tiktoken's), so nothing is downloaded at run time; tiktoken itself would fetch
its encoding files on first use.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

DEFAULT_ENCODING = "o200k_base"


@lru_cache(maxsize=4)
def encoding(name: str = DEFAULT_ENCODING) -> Any:
    """The named BPE encoding (cl100k_base, o200k_base, ...), loaded once per process."""
    with warnings.catch_warnings():  # bpe-openai reads its data with a deprecated importlib API
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding(name)


def encode(text: str, name: str = DEFAULT_ENCODING) -> list[int]:
    """Token ids of ``text``; special-token strings are counted as ordinary text."""
    if not text:
        return []
    return list(encoding(name).encode(text, disallowed_special=()))


def count_tokens(text: str, name: str = DEFAULT_ENCODING) -> int:
    """Number of model tokens in ``text`` under the named encoding."""
    return len(encode(text, name))


def truncate_newest(texts: list[str], budget: int, name: str = DEFAULT_ENCODING) -> int:
    """Index of the first text kept when keeping the newest texts whose tokens fit ``budget``.

    ``texts`` are in chronological order; the result ``i`` means ``texts[i:]`` fit (``len(texts)``
    when not even the newest fits). A BPE token is at least one UTF-8 byte, so texts whose bytes
    fit the budget fit without being tokenized (AMemGym's native agent, budget unbounded, would
    otherwise re-tokenize its whole history at every turn).
    """
    if sum(len(text.encode("utf-8")) for text in texts) <= budget:
        return 0
    used = 0
    for index in range(len(texts) - 1, -1, -1):
        used += count_tokens(texts[index], name)
        if used > budget:
            return index + 1
    return 0
