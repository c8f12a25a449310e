"""Token counts for context budgets, with a real BPE tokenizer that works offline.

``full_context`` truncates a history to a token budget, and LongMemEval / LoCoMo report context
lengths in model tokens, so budgets are counted with OpenAI's ``o200k_base`` encoding (GPT-4o
family) rather than a word estimate. The encodings ship inside the ``bpe-openai`` package (token
ids identical to tiktoken's), so nothing is downloaded at run time; tiktoken itself would fetch
its encoding files on first use. :mod:`mnemoflow.llm.bpe` loads them without the package's slow
import.
"""

from __future__ import annotations

from mnemoflow.llm.bpe import Tokenizer, tokenizer

DEFAULT_ENCODING = "o200k_base"


def encoding(name: str = DEFAULT_ENCODING) -> Tokenizer:
    """The named BPE encoding (cl100k_base, o200k_base, ...), loaded once per process."""
    return tokenizer(name)


def encode(text: str, name: str = DEFAULT_ENCODING) -> list[int]:
    """Token ids of ``text``; special-token strings are counted as ordinary text."""
    if not text:
        return []
    return tokenizer(name).encode(text)


def count_tokens(text: str, name: str = DEFAULT_ENCODING) -> int:
    """Number of model tokens in ``text`` under the named encoding."""
    if not text:
        return 0
    return tokenizer(name).count(text)


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
