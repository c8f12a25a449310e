"""Offline judges for MemoryBench's model-judged metrics (honest token-overlap heuristics).

- ``memorybench_dialsim_judge``: "Correct" when the reply holds at least half of the true
  answer's content words (stemmed), as the offline QA judge decides; a reply that declines to
  answer is "Wrong".
- ``memorybench_nfcats_judge``: NFCats has no gold answer, so the score measures how much of the
  question the answer addresses: the share c of the question's content words (stemmed) that the
  answer uses. 1 for an empty or declining answer or c = 0; 2 for c < 1/3; 3 for c < 2/3; 4 for
  c < 1; at full coverage 5 when the answer adds at least :data:`MIN_NEW_WORDS` content words of
  its own (it explains something), else 4. A relevance proxy, not a judgement of correctness.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.lexical import stems
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.judge import MIN_RECALL, declines, overlap_recall

MIN_NEW_WORDS = 15


@handles("memorybench_dialsim_judge")
def dialsim_judge(fields: dict[str, Any]) -> str:
    """Fields: question, reference, response."""
    response = fields["response"] or ""
    if declines(response):
        return "Wrong"
    recall = overlap_recall(str(fields["reference"]), response)
    return "Correct" if recall >= MIN_RECALL else "Wrong"


def nfcats_offline_score(question: str, response: str) -> int:
    """The 1-5 score of the module docstring."""
    if not response.strip() or declines(response):
        return 1
    asked = set(stems(question))
    said = stems(response)
    if not asked:
        return 3 if len(set(said)) >= MIN_NEW_WORDS else 2
    coverage = len(asked & set(said)) / len(asked)
    if coverage == 0:
        return 1
    if coverage < 1 / 3:
        return 2
    if coverage < 2 / 3:
        return 3
    if coverage < 1:
        return 4
    return 5 if len(set(said) - asked) >= MIN_NEW_WORDS else 4


@handles("memorybench_nfcats_judge")
def nfcats_judge(fields: dict[str, Any]) -> str:
    """Fields: question (the bare question), response."""
    return str(nfcats_offline_score(str(fields["question"]), fields["response"] or ""))
