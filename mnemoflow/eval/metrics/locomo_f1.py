"""LoCoMo's official answer F1, per question and by category.

Follows ``task_eval/evaluation.py`` of snap-research/locomo:

- normalization: drop commas, lowercase, remove ASCII punctuation, drop the words a / an / the /
  and, collapse whitespace; then Porter-stem every token with NLTK's ``PorterStemmer`` (its default
  NLTK_EXTENSIONS mode, the one the official code instantiates; it needs no data download);
- token F1 over multisets of stemmed tokens (0 when nothing overlaps);
- category 1 (multi-hop): prediction and gold are split on commas; the score is the mean, over gold
  parts, of the best F1 against any predicted part;
- category 2 (temporal) and 4 (single-hop): plain token F1;
- category 3 (open-domain): the gold is cut at its first ";" before plain token F1;
- category 5 (adversarial): 1 when the output contains "no information available" or
  "not mentioned" (case-insensitive), else 0.

Gold answers that are numbers in the JSON (years) are compared as their string form, as the
official code does with ``str(answer)``.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache

from mnemoflow.data.locomo import ADVERSARIAL_PHRASES

_PUNCTUATION = set(string.punctuation)
_DROPPED_WORDS = re.compile(r"\b(a|an|the|and)\b")


def normalize(text: str) -> str:
    """Official normalization (before stemming): the string the tokens are split from."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _DROPPED_WORDS.sub(" ", text)
    return " ".join(text.split())


@lru_cache(maxsize=1)
def _stemmer():
    # Imported lazily: NLTK takes most of a second to import and only F1 needs it.
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _stemmer().stem(word)


def tokens(text: str) -> list[str]:
    """Normalized, stemmed tokens of ``text``."""
    return [stem(word) for word in normalize(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Multiset token F1 between two strings after normalization and stemming."""
    predicted, expected = tokens(prediction), tokens(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1: mean over comma-separated gold parts of the best F1 against any predicted one."""
    predicted_parts = [part.strip() for part in str(prediction).split(",")]
    gold_parts = [part.strip() for part in str(gold).split(",")]
    best = [max(token_f1(p, g) for p in predicted_parts) for g in gold_parts]
    return sum(best) / len(best)


def adversarial_score(prediction: str) -> float:
    """Category 5: did the output say the information is not there?"""
    text = str(prediction).lower()
    return 1.0 if any(phrase in text for phrase in ADVERSARIAL_PHRASES) else 0.0


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The official per-question score for a LoCoMo QA item of ``category`` (1-5)."""
    prediction = "" if prediction is None else str(prediction)
    if category == 5:
        return adversarial_score(prediction)
    gold = "" if gold is None else str(gold)
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category == 3:
        return token_f1(prediction, gold.split(";")[0].strip())
    if category in (2, 4):
        return token_f1(prediction, gold)
    raise ValueError(f"LoCoMo category must be 1-5, got {category!r}")
