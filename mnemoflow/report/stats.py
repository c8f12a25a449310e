"""95 % confidence intervals for a mean score from per-question judgements.

Accuracy-like metrics (every value 0 or 1) get the Wilson score interval: unlike the normal
approximation it stays inside [0, 1] and is sensible at 0/n and n/n, which small benchmark slices
hit often. Graded metrics (token F1, judge scores in [0, 1]) get a percentile bootstrap with a
fixed seed, so the same judgements always give the same interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mnemoflow.intervals import Z95, wilson_interval  # noqa: F401  (re-exported for the report)

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int
    method: str  # "wilson" | "bootstrap" | "none"


def bootstrap_interval(
    values: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """Percentile bootstrap of the mean (2.5th and 97.5th percentiles of resampled means)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("no values")
    rng = np.random.default_rng(seed)
    # Resample in chunks so that a benchmark with tens of thousands of questions needs a few MB.
    chunk = max(1, min(resamples, 4_000_000 // values.size))
    means = np.concatenate(
        [
            values[
                rng.integers(0, values.size, size=(min(chunk, resamples - start), values.size))
            ].mean(axis=1)
            for start in range(0, resamples, chunk)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def mean_interval(values) -> Interval:
    """Mean of per-question values with a 95 % interval; NaN values (unparsed) are dropped."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    n = int(values.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "none")
    mean = float(values.mean())
    if np.isin(values, (0.0, 1.0)).all():
        low, high = wilson_interval(float(values.sum()), n)
        return Interval(mean, low, high, n, "wilson")
    if n == 1 or np.all(values == values[0]):
        return Interval(mean, mean, mean, n, "bootstrap")
    low, high = bootstrap_interval(values)
    return Interval(mean, low, high, n, "bootstrap")
