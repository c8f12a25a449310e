"""English ROUGE-L F (JRE-L's ``Rouge-L``) as Hugging Face ``evaluate.load("rouge")`` computes it.

``evaluate``'s rouge wraps Google's ``rouge_score`` with its defaults: lowercase, every run of
characters outside ``[a-z0-9]`` is a separator, no stemming; ROUGE-L is the longest common
subsequence of the two token lists, F = 2PR / (P + R) with P = LCS / |prediction| and R = LCS /
|reference|; for one pair the aggregated value is that F. Written out here so that no metric
script is fetched from a hub at run time; the LCS is iterative, so long texts are exact (unlike
the recursive LCS of the ``rouge`` package behind LexEval's Chinese ROUGE-L).
"""

from __future__ import annotations

import re

_SEPARATOR = re.compile(r"[^a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _SEPARATOR.sub(" ", text.lower()).split()


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (two-row dynamic programme)."""
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(reference: str, prediction: str) -> float:
    ref, pred = tokens(reference), tokens(prediction)
    if not ref or not pred:
        return 0.0
    lcs = lcs_length(ref, pred)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(pred), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)
