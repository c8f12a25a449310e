"""Offline reader: extract the context sentence (or choose the option) that best answers a question.

Scoring is BM25-style over the sentences of the context: each question content word found in a
sentence adds its inverse sentence frequency, damped by sentence length; word pairs of the question
found verbatim in the sentence ("my diet" but not "my sister's diet") add a proximity bonus, as
phrase-aware retrievers do. Among near-ties the later
sentence wins, because context is given in chronological order and newer statements supersede
older ones. When nothing in the context matches the question well, the reader abstains ("I don't
know") instead of guessing.
"""

from __future__ import annotations

import math
from typing import Any

from mnemoflow.lexical import sentences, stems, words
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.judge import declines

ABSTAIN = "I don't know."
#: Fraction of the question's idf mass a sentence must cover before the reader answers from it.
MIN_COVERAGE = 0.5
#: Scores within this ratio of the best count as ties, broken by recency.
TIE_RATIO = 0.9
#: Weight of the share of question word pairs that the sentence contains verbatim.
PHRASE_BONUS = 0.5


#: Memory notes speak of the user in the third person ("User's diet is vegan"); read them as the
#: user's own words so "my diet" in the question pairs with them.
_FIRST_PERSON = {"user's": "my", "users'": "my", "user": "i"}


def _pairs(text: str) -> set[tuple[str, str]]:
    tokens = [_FIRST_PERSON.get(t, t) for t in words(text)]
    return set(zip(tokens, tokens[1:], strict=False))


def _context_sentences(context: list[Any]) -> list[str]:
    out: list[str] = []
    for passage in context:
        text = passage["text"] if isinstance(passage, dict) else str(passage)
        out.extend(sentences(text))
    return out


def rank_sentences(question: str, candidates: list[str]) -> list[tuple[float, int]]:
    """(score, index) pairs, best first; score is the covered share of the question's idf mass."""
    query = set(stems(question))
    if not query or not candidates:
        return []
    bags = [set(stems(s)) for s in candidates]
    n = len(bags)
    idf = {w: math.log(1 + (n + 1) / (1 + sum(w in bag for bag in bags))) for w in query}
    total = sum(idf.values())
    avg_len = sum(len(b) for b in bags) / n or 1.0
    query_pairs = _pairs(question)
    scored = []
    for index, bag in enumerate(bags):
        covered = sum(idf[w] for w in query if w in bag)
        if not covered:
            continue
        damping = 1.0 / (0.75 + 0.25 * len(bag) / avg_len)
        phrase = (
            len(query_pairs & _pairs(candidates[index])) / len(query_pairs) if query_pairs else 0
        )
        scored.append((covered / total * min(damping, 1.0) + PHRASE_BONUS * phrase, index))
    scored.sort(key=lambda pair: (-pair[0], -pair[1]))
    return scored


def pick(scored: list[tuple[float, int]]) -> tuple[float, int] | None:
    """Best sentence, preferring the latest among near-ties."""
    if not scored:
        return None
    best = scored[0][0]
    ties = [pair for pair in scored if pair[0] >= best * TIE_RATIO]
    return max(ties, key=lambda pair: pair[1])


def restates(sentence: str, question: str) -> bool:
    """A sentence that quotes the question (a remembered "Speaker user says: <question>") is an
    echo, not an answer."""
    asked = " ".join(words(question))
    return bool(asked) and asked in " ".join(words(sentence))


@handles("answer")
def answer(fields: dict[str, Any]) -> str:
    """Fields: question, context (list of passages or {text, time}), optional options."""
    candidates = [
        s for s in _context_sentences(fields["context"]) if not restates(s, fields["question"])
    ]
    choice = pick(rank_sentences(fields["question"], candidates))
    if choice is None or choice[0] < MIN_COVERAGE:
        return _declining(fields.get("options") or [])
    sentence = candidates[choice[1]]
    options = fields.get("options") or []
    if options:
        return _choose_option(sentence, options)
    return sentence


def _choose_option(sentence: str, options: list[str]) -> str:
    """The option whose words the evidence sentence contains most.

    When no option is supported, a "not mentioned" option is chosen if there is one (LoCoMo's
    adversarial questions), otherwise the reader abstains.
    """
    bag = set(stems(sentence))
    best, best_share = _declining(options), 0.0
    for option in options:
        words = stems(option)
        share = sum(w in bag for w in words) / len(words) if words else 0.0
        if share > best_share:
            best, best_share = option, share
    return best


def _declining(options: list[str]) -> str:
    """The option that says the answer is not in the conversation, else an abstention."""
    for option in options:
        if declines(option):
            return option
    return ABSTAIN
