"""Offline reading notes (LongMemEval's separate chain-of-note): the chunk's relevant sentences.

A note keeps, in order, the sentences of the chunk that cover at least :data:`NOTE_COVERAGE` of the
question's idf mass (the reader's own sentence scoring), or says "empty" when none does, as the
official note prompt asks.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.lexical import sentences
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.reader import rank_sentences

EMPTY = "empty"
#: Lower than the reader's answer threshold: a note gathers candidates, the answer picks one.
NOTE_COVERAGE = 0.25


@handles("reading_note")
def reading_note(fields: dict[str, Any]) -> str:
    """Fields: question, context (one chunk as [{text, time}])."""
    candidates: list[str] = []
    for passage in fields["context"]:
        text = passage["text"] if isinstance(passage, dict) else str(passage)
        candidates.extend(sentences(text))
    keep = sorted(
        i for score, i in rank_sentences(fields["question"], candidates) if score >= NOTE_COVERAGE
    )
    return " ".join(candidates[i] for i in keep) if keep else EMPTY
