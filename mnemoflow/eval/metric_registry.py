"""Deterministic metrics by name, for ``mnemoflow metric NAME --pairs FILE``.

A researcher checks a number by hand: each JSONL line is ``{"prediction", "reference"}`` plus the
metric's own fields, and the metric gives one value per line (``None`` where the metric defers to
a judge). A metric scores a whole list at once, so batched ones (BERTScore) run one forward pass.
Add a metric with one :data:`DETERMINISTIC_METRICS` entry (the MemoryBench metrics module adds
``locomo_f1``, ``dialsim_exact`` and ``rouge_l_zh`` the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]


@dataclass(frozen=True)
class DeterministicMetric:
    name: str
    summary: str
    score_all: Callable[[list[Record]], list[float | None]]
    #: Fields every line needs besides ``prediction`` and ``reference``.
    extra_fields: tuple[str, ...] = ()


def per_pair(fn: Callable[[str, str], float | None]) -> Callable[[list[Record]], list]:
    """A metric of one (reference, prediction) pair, applied line by line."""
    return lambda records: [fn(r["reference"], r["prediction"]) for r in records]


def _meteor(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.meteor import meteor

    return per_pair(meteor)(records)


def _bertscore(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.bertscore import bertscore

    scores = bertscore([r["prediction"] for r in records], [r["reference"] for r in records])
    return [f1 for _, _, f1 in scores]


def _rouge_l(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.rouge_l_en import rouge_l

    return per_pair(rouge_l)(records)


def _readability(which: str) -> Callable[[list[Record]], list[float | None]]:
    def score(records: list[Record]) -> list[float | None]:
        from mnemoflow.eval import readability

        fn = {
            "cli": readability.coleman_liau,
            "fkgl": readability.flesch_kincaid_grade,
            "dcrs": readability.dale_chall,
        }[which]
        return [fn(r["prediction"]) for r in records]

    return score


DETERMINISTIC_METRICS: dict[str, DeterministicMetric] = {
    m.name: m
    for m in (
        DeterministicMetric(
            "meteor", "WritingPrompts METEOR (nltk, word_tokenize, WordNet 3.0)", _meteor
        ),
        DeterministicMetric(
            "bertscore",
            "BERTScore F1 with the bundled all-MiniLM-L6-v2, num_layers 6 (not the paper's model)",
            _bertscore,
        ),
        DeterministicMetric("rouge_l", "English ROUGE-L F (HF evaluate / rouge_score)", _rouge_l),
        DeterministicMetric("cli", "Coleman-Liau index of the prediction", _readability("cli")),
        DeterministicMetric("fkgl", "Flesch-Kincaid grade of the prediction", _readability("fkgl")),
        DeterministicMetric("dcrs", "Dale-Chall score of the prediction", _readability("dcrs")),
    )
}


def get_metric(name: str) -> DeterministicMetric:
    if name not in DETERMINISTIC_METRICS:
        raise ValueError(
            f"unknown metric {name!r}; deterministic metrics: {sorted(DETERMINISTIC_METRICS)}"
        )
    return DETERMINISTIC_METRICS[name]
