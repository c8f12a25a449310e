"""Canonical batches for a local encoder: a text's vector must not depend on its batchmates.

A transformer's float output for one text changes in its last bits with the shape of the batch it
is run in: padding to the batch's longest text changes the matrix shapes, so the kernels reduce in
another order. The embedding cache keeps whichever job embedded a text first, so those bits would
depend on job order, and a dense-retrieval near-tie could flip between runs.

Here every text is padded to a length that depends on its own token count only (the next rung of
:data:`LADDER`), and a batch holds texts of one padded length. Measured on CPU (MKL,
1 and 2 threads, batch sizes 1 to 65, any batchmates): a row's output is then bitwise the same.
One more shape matters: when no position of a batch is padding, transformers skips the attention
mask (another SDPA path, other bits), so such a batch gets one filler row (``[CLS][SEP]``).
"""

from __future__ import annotations

from typing import Any

#: The padded lengths: powers of two and the midpoints between them (each at most 1.5x the one
#: before), then multiples of 256. A text of n tokens is padded to the smallest one >= n. Fewer
#: lengths mean fewer, fuller batches, which on CPU outweighs the extra padding: on mixed-length
#: turns this ladder embedded faster than padding to multiples of 8 or 16 (docs/performance.md).
LADDER = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)

#: The scheme's name in the embedding cache key: vectors computed another way are other entries.
SCHEME = "canonical-ladder-v1"


def padded_length(tokens: int) -> int:
    """The length a text of ``tokens`` tokens is padded to (a function of its length alone)."""
    for length in LADDER:
        if tokens <= length:
            return length
    return -(-tokens // 256) * 256


def plan(lengths: list[int], batch_size: int) -> list[tuple[int, list[int]]]:
    """(padded length, row indices) of each batch: rows of one padded length, in input order,
    at most ``batch_size`` per batch."""
    buckets: dict[int, list[int]] = {}
    for row, tokens in enumerate(lengths):
        buckets.setdefault(padded_length(tokens), []).append(row)
    return [
        (length, rows[start : start + batch_size])
        for length, rows in sorted(buckets.items())
        for start in range(0, len(rows), batch_size)
    ]


def batch_features(
    features: dict[str, Any], lengths: list[int], rows: list[int], length: int, pad_id: int
) -> dict[str, Any]:
    """The model inputs of one canonical batch, cut from ``features`` (the tokenizer's output
    for every text, padded to the longest): each row padded to ``length``, plus a filler row
    when no position would be padding."""
    import torch

    filler = all(lengths[row] == length for row in rows)
    size = len(rows) + int(filler)
    batch: dict[str, Any] = {}
    for key, value in features.items():
        if not isinstance(value, torch.Tensor):
            batch[key] = value
            continue
        if value.ndim != 2 or value.shape[0] != len(lengths):
            raise ValueError(f"canonical batches take per-token inputs only, not {key!r}")
        tensor = value.new_full((size, length), pad_id if key == "input_ids" else 0)
        for i, row in enumerate(rows):
            tensor[i, : lengths[row]] = value[row, : lengths[row]]
        if filler:  # a copy of a row's first and last token ([CLS] [SEP]): two real positions
            tensor[-1, :2] = value[rows[0], [0, lengths[rows[0]] - 1]]
        batch[key] = tensor
    return batch
