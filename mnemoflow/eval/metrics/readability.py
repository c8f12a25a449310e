"""Readability of a generated article (JRE-L): Coleman-Liau (CLI), Flesch-Kincaid grade (FKGL),
Dale-Chall (DCRS), with textstat's formulas and counting rules.

The reference calls ``textstat`` (unpinned). Its current release counts English syllables with
the CMU dictionary that nltk downloads at first use, which a run here must never do, so the
formulas and counts are written out below (textstat 0.7.13's):

- words: punctuation except apostrophes removed, then whitespace split;
- sentences: ``\\b[^.!?]+[.!?]*`` pieces, those of <= 2 words not counted, at least 1;
- letters: characters that are neither whitespace nor punctuation;
- CLI = 0.058 * letters/100 words - 0.296 * sentences/100 words - 15.8;
- FKGL = 0.39 * words/sentence + 11.8 * syllables/word - 15.59;
- DCRS = 0.1579 * %difficult + 0.0496 * words/sentence (+ 3.6365 when %difficult > 5), a word
  being difficult when it is not on the Dale-Chall list of easy words (the list textstat ships,
  read from the installed package).

One documented difference: syllables are counted by vowel groups (a silent final "e" dropped,
at least one per word) instead of CMUdict / Pyphen, so FKGL can differ from textstat's by a few
tenths on real text. CLI and DCRS use no syllables and match textstat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_NOT_WORD = re.compile(r"[^\w\s']")
_NOT_LETTER = re.compile(r"[^\w]")
_SENTENCE = re.compile(r"\b[^.!?]+[.!?]*")
_VOWELS = re.compile(r"[aeiouy]+")


@cache
def easy_words() -> frozenset[str]:
    try:
        text = resources.files("textstat").joinpath("resources/en/easy_words.txt").read_text()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise OSError(
            "DCRS needs the Dale-Chall easy-word list: `pip install textstat==0.7.13`"
        ) from exc
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


def words(text: str) -> list[str]:
    return _NOT_WORD.sub("", text).split()


def sentence_count(text: str) -> int:
    if not text:
        return 0
    pieces = _SENTENCE.findall(text)
    return max(1, sum(len(words(piece)) > 2 for piece in pieces))


def letter_count(text: str) -> int:
    return len(_NOT_LETTER.sub("", text))


def syllables(word: str) -> int:
    """Vowel groups; a final silent "e" (not "-le") does not count; at least one."""
    word = word.lower().strip("'")
    count = len(_VOWELS.findall(word))
    if word.endswith("e") and not word.endswith(("le", "ee", "ye")) and count > 1:
        count -= 1
    return max(1, count)


@dataclass(frozen=True)
class Readability:
    cli: float
    fkgl: float
    dcrs: float


def coleman_liau(text: str) -> float:
    n_words = len(words(text))
    if not n_words:
        return 0.0
    letters = 100 * letter_count(text) / n_words
    sentences = 100 * sentence_count(text) / n_words
    if letters == 0 or sentences == 0:
        return 0.0
    return 0.058 * letters - 0.296 * sentences - 15.8


def flesch_kincaid_grade(text: str) -> float:
    tokens = words(text)
    if not tokens:
        return 0.0
    per_sentence = len(tokens) / sentence_count(text)
    per_word = sum(syllables(w) for w in tokens) / len(tokens)
    return 0.39 * per_sentence + 11.8 * per_word - 15.59


def dale_chall(text: str) -> float:
    tokens = words(text)
    if not tokens:
        return 0.0
    easy = easy_words()
    difficult = 100 * sum(w.lower() not in easy for w in tokens) / len(tokens)
    score = 0.1579 * difficult + 0.0496 * len(tokens) / sentence_count(text)
    return score + 3.6365 if difficult > 5 else score


def readability(text: str) -> Readability:
    return Readability(coleman_liau(text), flesch_kincaid_grade(text), dale_chall(text))
