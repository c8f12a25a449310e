"""Is a difference more than noise, and do two rankings agree?

- :func:`kendall_tau`: Kendall's τ-b between two scorings of the same systems (ties counted
  as neither concordant nor discordant, and corrected for, so that τ = 1 exactly when the
  rankings agree).
- :func:`mcnemar`: the exact McNemar test for two systems judged right / wrong on the same items:
  only the discordant items count (``b`` right only in A, ``c`` right only in B); under the null
  each is A's or B's with probability 1/2, so the two-sided p-value is
  ``min(1, 2 · P(Binomial(b + c, 1/2) <= min(b, c)))``.
- :func:`paired_bootstrap`: for graded values, the mean of the per-item differences B - A with a
  percentile-bootstrap 95 % interval over items (2000 resamples, fixed seed) and the two-sided
  bootstrap p-value ``min(1, 2 · min(share of resampled means <= 0, share >= 0))``.
- :func:`cluster_paired_test`: for items grouped in clusters that are not independent (an
  AMemGym user's questions, asked again every period): the mean of the differences B - A over
  items, its 95 % interval from a percentile bootstrap over clusters, and the p-value of a
  sign-flip permutation test over clusters (each cluster's summed difference keeps or flips its
  sign; exact over every sign pattern up to :data:`EXACT_CLUSTERS` clusters, else
  :data:`~mnemoflow.report.stats.BOOTSTRAP_RESAMPLES` random patterns with a fixed seed):
  ``p = share of patterns whose |mean difference| >= the observed one``.
- :func:`holm`: Holm's step-down adjustment of the p-values of a family of tests (the pairs
  compared on one metric), so that "significant" keeps its 5 % error rate over the family.
- :func:`rank_marks`: the rank change of each system between two rankings, marked as the
  AMemGym paper marks them (``▲k``: k places higher in the second ranking, ``▼k`` lower, ``—``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mnemoflow.report.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED


def kendall_tau(x, y) -> float:
    """Kendall's τ-b of paired scores ``x`` and ``y`` (NaN with fewer than two pairs or when one
    side is constant)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError("x and y must have the same length")
    n = x.size
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    if n < 2 or denominator == 0:
        return math.nan
    return (concordant - discordant) / denominator


def ranks(values, higher_is_better: bool = True) -> list[int]:
    """Competition ranks (1 = best; ties share the better rank: 1, 2, 2, 4)."""
    values = [float(v) for v in values]
    better = (lambda a, b: a > b) if higher_is_better else (lambda a, b: a < b)
    return [1 + sum(better(other, v) for other in values) for v in values]


def rank_mark(first: int, second: int) -> str:
    """``▲k`` when the second ranking puts the system k places higher, ``▼k`` lower, ``—`` same."""
    change = first - second
    if change > 0:
        return f"▲{change}"
    if change < 0:
        return f"▼{-change}"
    return "—"


def rank_marks(first, second, higher_is_better: bool = True) -> list[str]:
    """The marks of :func:`rank_mark` for systems scored ``first`` and ``second``."""
    a, b = ranks(first, higher_is_better), ranks(second, higher_is_better)
    return [rank_mark(i, j) for i, j in zip(a, b, strict=True)]


@dataclass(frozen=True)
class PairedTest:
    test: str  # "mcnemar" | "paired-bootstrap" | "cluster-permutation"
    n: int  # items both systems have a value for
    mean_a: float
    mean_b: float
    diff: float  # mean of B - A
    low: float  # 95 % interval of the difference (NaN for McNemar)
    high: float
    p_value: float
    b: int = 0  # McNemar: items right only in A
    c: int = 0  # McNemar: items right only in B
    clusters: int = 0  # cluster-permutation: the clusters the items fall in


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant items (1.0 when none)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(Fraction(math.comb(n, k)) for k in range(min(b, c) + 1)) / Fraction(2**n)
    return float(min(Fraction(1), 2 * tail))


def mcnemar(a, b) -> PairedTest:
    """McNemar's exact test for right (1) / wrong (0) values of two systems on the same items."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        raise ValueError("McNemar needs right/wrong (0/1) values")
    only_a = int(((a == 1) & (b == 0)).sum())
    only_b = int(((a == 0) & (b == 1)).sum())
    return PairedTest(
        "mcnemar",
        int(a.size),
        float(a.mean()),
        float(b.mean()),
        float((b - a).mean()),
        math.nan,
        math.nan,
        mcnemar_p(only_a, only_b),
        only_a,
        only_b,
    )


def resampled_means(
    values: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """Means of ``resamples`` resamples of ``values`` with replacement (in chunks of a few MB)."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(resamples, 4_000_000 // values.size))
    return np.concatenate(
        [
            values[
                rng.integers(0, values.size, size=(min(chunk, resamples - start), values.size))
            ].mean(axis=1)
            for start in range(0, resamples, chunk)
        ]
    )


def paired_bootstrap(
    a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> PairedTest:
    """Mean difference B - A over items, its percentile-bootstrap 95 % interval and p-value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diffs = b - a
    if diffs.size == 0:
        raise ValueError("no paired items")
    means = resampled_means(diffs, resamples, seed)
    low, high = np.percentile(means, [2.5, 97.5])
    p = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    return PairedTest(
        "paired-bootstrap",
        int(diffs.size),
        float(a.mean()),
        float(b.mean()),
        float(diffs.mean()),
        float(low),
        float(high),
        p,
    )


def paired_test(a, b) -> PairedTest:
    """McNemar when every value is right / wrong, else the paired bootstrap."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all():
        return mcnemar(a, b)
    return paired_bootstrap(a, b)


#: Up to this many clusters the permutation test enumerates every sign pattern (2**12 = 4096).
EXACT_CLUSTERS = 12


def cluster_paired_test(
    a, b, clusters, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> PairedTest:
    """Mean difference B - A over items grouped in ``clusters``: a cluster bootstrap interval
    and a sign-flip permutation p-value over clusters (see the module docstring)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diffs = b - a
    if diffs.size == 0:
        raise ValueError("no paired items")
    _, index = np.unique(np.asarray(clusters), return_inverse=True)
    sums = np.bincount(index, weights=diffs)
    counts = np.bincount(index).astype(float)
    k, total = sums.size, counts.sum()
    observed = float(sums.sum() / total)
    rng = np.random.default_rng(seed)
    if k <= EXACT_CLUSTERS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)))
    else:
        signs = rng.choice((1.0, -1.0), size=(resamples, k))
    flipped = np.abs(signs @ sums) / total
    p = float((flipped >= abs(observed) - 1e-12).mean())
    draws = rng.integers(0, k, size=(resamples, k))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return PairedTest(
        "cluster-permutation",
        int(diffs.size),
        float(a.mean()),
        float(b.mean()),
        observed,
        float(low),
        float(high),
        min(1.0, p),
        clusters=k,
    )


def holm(p_values) -> list[float]:
    """Holm-adjusted p-values, in the given order: the i-th smallest of m is multiplied by
    m - i + 1 (i from 1), made non-decreasing in that order and capped at 1; NaN stays NaN."""
    values = [float(p) for p in p_values]
    tested = sorted((p, i) for i, p in enumerate(values) if not math.isnan(p))
    m = len(tested)
    adjusted = list(values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
