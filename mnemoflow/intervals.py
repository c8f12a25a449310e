"""The Wilson score interval, shared by scoring (the ``ci95_*`` score rows) and the report.

One definition, so that a score and the interval the report draws around it always agree.
"""

from __future__ import annotations

import math

#: Two-sided 95 % standard-normal quantile.
Z95 = 1.959963984540054


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``: stays inside [0, 1]
    and is sensible at 0/n and n/n, unlike the normal approximation."""
    if n <= 0:
        raise ValueError("n must be positive")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0/n and n/n the bound is exactly p; rounding would otherwise put it a hair inside.
    low = 0.0 if p <= 0 else max(0.0, min(p, centre - half))
    high = 1.0 if p >= 1 else min(1.0, max(p, centre + half))
    return low, high
