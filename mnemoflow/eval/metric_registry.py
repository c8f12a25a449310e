"""Deterministic metrics by name, for ``mnemoflow metric NAME --pairs FILE``.

A researcher checks a number by hand: each JSONL line is ``{"prediction", "reference"}`` plus the
metric's own fields, and the metric gives one value per line (``None`` where the metric defers to
a judge). A metric scores a whole list at once, so batched ones (BERTScore) run one forward pass.
Add a metric by registering one :class:`DeterministicMetric` in :data:`DETERMINISTIC_METRICS`.
MemoryBench's model-free metrics are here too: ``locomo_f1`` (with ``category``; a category-5
``reference`` is the two-option object or its JSON text), ``dialsim_exact`` (1.0 on the
reference's exact / lower-case match, else ``None``: DialSim hands the rest to its judge) and
``rouge_l_zh`` (LexEval, jieba tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mnemoflow.registry import Registry

Record = dict[str, Any]


@dataclass(frozen=True)
class DeterministicMetric:
    name: str
    summary: str
    score_all: Callable[[list[Record]], list[float | None]]
    #: Fields every line needs besides ``prediction`` and ``reference``.
    extra_fields: tuple[str, ...] = ()
    #: What ``reference`` may be (an object only where the metric reads one).
    reference_kinds: tuple[type, ...] = (str,)
    #: ``check(record, loc)``: the metric's own field checks, raising a one-line DataError.
    check: Callable[[Record, str], None] | None = None


def per_pair(fn: Callable[[str, str], float | None]) -> Callable[[list[Record]], list]:
    """A metric of one (reference, prediction) pair, applied line by line."""
    return lambda records: [fn(r["reference"], r["prediction"]) for r in records]


def _meteor(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.metrics.meteor import meteor

    return per_pair(meteor)(records)


def _bertscore(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.metrics.bertscore import bertscore

    scores = bertscore([r["prediction"] for r in records], [r["reference"] for r in records])
    return [f1 for _, _, f1 in scores]


def _rouge_l(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.metrics.rouge_l_en import rouge_l

    return per_pair(rouge_l)(records)


def _readability(which: str) -> Callable[[list[Record]], list[float | None]]:
    def score(records: list[Record]) -> list[float | None]:
        from mnemoflow.eval.metrics import readability

        fn = {
            "cli": readability.coleman_liau,
            "fkgl": readability.flesch_kincaid_grade,
            "dcrs": readability.dale_chall,
        }[which]
        return [fn(r["prediction"]) for r in records]

    return score


def _locomo_f1(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.memorybench.memorybench_locomo_f1 import memorybench_locomo_f1

    return [
        float(memorybench_locomo_f1(r["prediction"], r["reference"], int(r["category"])))
        for r in records
    ]


def _check_locomo(record: Record, loc: str) -> None:
    from mnemoflow.data.validate import DataError, field
    from mnemoflow.eval.memorybench.memorybench_locomo_f1 import options_of

    category = field(record, "category", int, loc)
    if not 1 <= category <= 5:
        raise DataError(f"{loc}: 'category' must be 1-5, got {category}")
    if category == 5:
        try:
            options_of(record["reference"])
        except ValueError:
            raise DataError(
                f"{loc}: 'reference' of a category-5 item must be the options object "
                '{"a": ..., "b": ...} (or its JSON text)'
            ) from None


def _dialsim_exact(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.memorybench.dialsim_accuracy import exact_match

    return [1.0 if exact_match(r["prediction"], r["reference"]) else None for r in records]


def _rouge_l_zh(records: list[Record]) -> list[float | None]:
    from mnemoflow.eval.metrics.rouge_l_zh import rouge_l_zh

    return [rouge_l_zh(r["prediction"], r["reference"]) for r in records]


#: Deterministic metrics by name.
DETERMINISTIC_METRICS = Registry("metric")

for _metric in (
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
    DeterministicMetric(
        "locomo_f1",
        "MemoryBench Locomo-k f1 by category (cat 5: option letters -> option text)",
        _locomo_f1,
        extra_fields=("category",),
        reference_kinds=(str, dict),
        check=_check_locomo,
    ),
    DeterministicMetric(
        "dialsim_exact",
        "DialSim accuracy's model-free part: 1 on exact/lower-case match, else null (judge)",
        _dialsim_exact,
    ),
    DeterministicMetric(
        "rouge_l_zh",
        "LexEval ROUGE-L F over jieba tokens (true value on long texts)",
        _rouge_l_zh,
    ),
):
    DETERMINISTIC_METRICS.register(_metric.name)(_metric)


def get_metric(name: str) -> DeterministicMetric:
    return DETERMINISTIC_METRICS.get(name)
