"""Distribution statistics and the sample-size check for tail percentiles.

Percentiles use numpy's default "linear" method (Hyndman-Fan type 7): the q-th percentile of n
sorted values sits at position q/100 * (n - 1), interpolated linearly between neighbours.
`std` is the sample standard deviation (ddof = 1).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
STATS = ("n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max")
CERTIFIED = {"p95_certified": 0.95, "p99_certified": 0.99}
CONFIDENCE = 0.99


def describe(values: object) -> dict[str, float]:
    """n, mean, std, min, p50, p90, p95, p99, max of the finite values (NaN and inf dropped).

    With no values n = 0 and every other stat is NaN; std needs two values.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {"n": 0.0} | dict.fromkeys(STATS[1:], math.nan)
    quantiles = np.percentile(x, list(PERCENTILES.values()), method="linear")
    return {
        "n": float(len(x)),
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)) if len(x) > 1 else math.nan,
        "min": float(x.min()),
        **{name: float(v) for name, v in zip(PERCENTILES, quantiles)},
        "max": float(x.max()),
    }


def tail_certified(n: int, q: float, confidence: float = CONFIDENCE) -> bool:
    """Whether n samples are enough to bound the q-quantile (0 < q < 1) from above at `confidence`.

    Criterion: with n independent samples, the second-largest one is an upper bound of the true
    q-quantile unless at most one sample exceeds it, which happens with probability
    `P(Binomial(n, 1 - q) <= 1) = q**n + n * (1 - q) * q**(n - 1)`; certified when that is at most
    `1 - confidence`. At 99% this gives the MLPerf LoadGen early-stopping minimums: 11 samples for
    p50, 64 for p90, 130 for p95, 662 for p99 (about 6.64 / (1 - q)).
    """
    if n < 2:
        return False
    miss = q**n + n * (1 - q) * q ** (n - 1)
    return miss <= 1 - confidence


def certification(n: float) -> dict[str, float]:
    """`p95_certified` and `p99_certified` as 1.0 / 0.0 for a sample of size n."""
    return {name: float(tail_certified(int(n), q)) for name, q in CERTIFIED.items()}


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """`sum(w * x) / sum(w)` over entries where x is finite; NaN when no weight remains."""
    keep = np.isfinite(values) & (weights > 0)
    total = weights[keep].sum()
    return float((weights[keep] * values[keep]).sum() / total) if total > 0 else math.nan


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion p = successes / n.

        z = Phi^-1((1 + confidence) / 2)            (1.95996... for 95%)
        center = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        interval = [center - half, center + half]

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at p = 0 or 1.
    Returns (nan, nan) when n == 0.
    """
    if n == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamp only float rounding (p = 0 or 1 give a bound of 0 or 1 up to an ulp).
    return max(0.0, center - half), min(1.0, center + half)
