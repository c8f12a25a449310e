"""LexEval's ROUGE-L F for MemoryBench: Chinese text, jieba tokens, the ``rouge`` 1.0.1 formula.

The reference (``src/dataset/LexEval.py:eval_rougel``) normalizes both texts (lowercase, drop
ASCII and CJK punctuation, drop all whitespace), cuts them with jieba in precise mode, joins the
tokens with spaces and takes ``rouge.Rouge().get_scores(pred, gold, avg=True)["rouge-l"]["f"]``.
That package computes a summary-level ROUGE-L with *distinct* tokens (its default
``exclusive=True``): with one sentence on each side (normalization removed every ".", the
package's sentence separator),

- m = number of distinct reference tokens, n = number of distinct response tokens,
- llcs = number of distinct tokens on ONE longest common subsequence, the one its backtracking
  finds (from the end: on equal tokens take both; else step back in the reference when that
  cell is strictly larger, otherwise in the response),
- F = 2 P R / (P + R + 1e-8) with P = llcs / n, R = llcs / m (an identical text scores
  0.999999995, not 1).

Difference from the reference (docs/memorybench.md): its backtracking is recursive, so texts
whose LCS walk is longer than Python's recursion limit (about 1,000 tokens together) raise
RecursionError, which ``eval_rougel`` swallows into 0.0 (LexEval-QA item 56 scores 0.0 against
itself). Here the walk is iterative and the true value is returned. Empty texts (after
normalization) score 0.0, as in the reference.
"""

from __future__ import annotations

import string
from functools import lru_cache

import numpy as np

_CJK_PUNCTUATION = (
    "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣"
    "､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
)
_PUNCTUATION = set(string.punctuation + _CJK_PUNCTUATION)
EPSILON = 1e-8


def normalize_zh(text: str) -> str:
    """Lowercase, drop ASCII + CJK punctuation, drop every whitespace (``normalize_zh_answer``)."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return "".join(text.split())


@lru_cache(maxsize=1)
def _jieba():
    # Imported lazily: jieba builds its dictionary on first use (about a second).
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def tokens(text: str) -> list[str]:
    """jieba precise-mode tokens of the normalized text, as the reference splits them."""
    joined = " ".join(_jieba().cut(normalize_zh(text), cut_all=False))
    return joined.split()


def lcs_table(reference: list[str], response: list[str]) -> np.ndarray:
    """LCS lengths ``t[i, j]`` of ``reference[:i]`` and ``response[:j]``, row by row.

    A row is the running maximum of "diagonal + 1 where the tokens match, else the cell above":
    the same numbers as the textbook recurrence, since ``t[i, j-1] <= t[i-1, j-1] + 1``.
    """
    vocabulary: dict[str, int] = {}
    ref = np.array([vocabulary.setdefault(w, len(vocabulary)) for w in reference], dtype=np.int64)
    hyp = np.array([vocabulary.setdefault(w, len(vocabulary)) for w in response], dtype=np.int64)
    table = np.zeros((len(ref) + 1, len(hyp) + 1), dtype=np.int32)
    for i in range(1, len(ref) + 1):
        above = table[i - 1]
        candidate = np.where(hyp == ref[i - 1], above[:-1] + 1, above[1:])
        table[i, 1:] = np.maximum.accumulate(candidate)
    return table


def lcs_tokens(reference: list[str], response: list[str]) -> list[str]:
    """The tokens of the LCS the ``rouge`` package reconstructs (its tie-breaking), iteratively."""
    table = lcs_table(reference, response)
    i, j, out = len(reference), len(response), []
    while i > 0 and j > 0:
        if reference[i - 1] == response[j - 1]:
            out.append(reference[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1, j] > table[i, j - 1]:
            i -= 1
        else:
            j -= 1
    out.reverse()
    return out


def rouge_l_f(response_tokens: list[str], reference_tokens: list[str]) -> float:
    """ROUGE-L F of token lists with the package's distinct-token counts (see module doc)."""
    if not response_tokens or not reference_tokens:
        return 0.0
    common = len(set(lcs_tokens(reference_tokens, response_tokens)))
    precision = common / len(set(response_tokens))
    recall = common / len(set(reference_tokens))
    return 2.0 * (precision * recall / (precision + recall + EPSILON))


def rouge_l_zh(response: str, golden: str) -> float:
    """LexEval's per-item ``rougel``: ROUGE-L F of the response against the golden answer."""
    return rouge_l_f(tokens(response), tokens(golden))
