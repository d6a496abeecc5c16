"""Seeded statistics for comparing runs: bootstrap intervals, exact McNemar, paired accuracy change.

Every bootstrap draws its resamples from `numpy.random.default_rng(seed)`, so the same inputs and
seed give the same interval on every machine. Intervals are 95% percentile intervals: the 2.5th
and 97.5th percentiles (numpy's linear method) of the statistic over the resamples, finite
resamples only (a resample whose denominator is 0 gives no value).

Paired resampling draws one set of request indices and applies it to both runs, which must then
be aligned row by row (same prompt at the same position). It removes the prompt-to-prompt spread
that the two runs share, so a paired interval is narrower whenever the runs move together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

Interval = tuple[float, float, float]  # (point, ci95_low, ci95_high)
# change(base_indices, cand_indices) -> one value per row; both arguments have shape (R, n).
ChangeFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
# stat(samples, axis=-1) reduces the last axis, as np.mean and np.median do.
Statistic = Callable[..., np.ndarray]

N_RESAMPLES = 2000
CONFIDENCE = 0.95
# scipy (about 0.5 s and 60 MB to import) is imported by the functions that test something, when
# called: a run that only bootstraps its summary never loads it.


def percentile_stat(q: float) -> Statistic:
    """The q-th percentile (numpy linear method) as a statistic: `percentile_stat(95)` is P95."""
    return functools.partial(np.percentile, q=q)


def _interval(point: float, draws: np.ndarray) -> Interval:
    """(point, low, high): the percentile interval of the finite draws; NaN bounds when none."""
    finite = draws[np.isfinite(draws)]
    if not math.isfinite(point) or finite.size == 0:
        return float(point), math.nan, math.nan
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(point), float(low), float(high)


def _indices(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n) request indices drawn with replacement."""
    return rng.integers(0, n, size=(n_resamples, n))


def bootstrap_change(n_base: int, n_cand: int, change: ChangeFn, paired: bool,
                     n_resamples: int = N_RESAMPLES, seed: int = 0) -> Interval:
    """Point estimate and 95% percentile interval of any two-run statistic `change`.

    The point is `change` on all requests (indices 0..n-1). Paired: one index matrix for both runs
    (requires n_base == n_cand, rows aligned); unpaired: independent matrices from the same seeded
    generator. NaN everywhere when either run has no requests.
    """
    if n_base == 0 or n_cand == 0:
        return math.nan, math.nan, math.nan
    if paired and n_base != n_cand:
        raise ValueError(f"paired resampling needs aligned runs, got {n_base} and {n_cand} requests")
    point = float(change(np.arange(n_base)[None, :], np.arange(n_cand)[None, :])[0])
    rng = np.random.default_rng(seed)
    base_idx = _indices(n_base, n_resamples, rng)
    cand_idx = base_idx if paired else _indices(n_cand, n_resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = np.asarray(change(base_idx, cand_idx), dtype=float)
    return _interval(point, draws)


def bootstrap_ci(sample: np.ndarray, stat: Statistic = np.mean, n_resamples: int = N_RESAMPLES,
                 seed: int = 0) -> Interval:
    """One run's `stat(sample)` with a 95% percentile interval over request resamples."""
    x = np.asarray(sample, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = stat(x[_indices(x.size, n_resamples, rng)], axis=-1)
    return _interval(float(stat(x, axis=-1)), np.asarray(draws, dtype=float))


def bootstrap_ratio_of_sums(num: np.ndarray, den: np.ndarray, n_resamples: int = N_RESAMPLES,
                            seed: int = 0) -> Interval:
    """One run's `sum(num) / sum(den)` (e.g. tokens / decode seconds = tok/s), resampling requests
    (a request's num and den travel together), with a 95% percentile interval."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if num.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = _indices(num.size, n_resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = num[idx].sum(axis=-1) / den[idx].sum(axis=-1)
        point = num.sum() / den.sum() if den.sum() != 0 else math.nan
    return _interval(float(point), draws)


def bootstrap_relative_change(base: np.ndarray, cand: np.ndarray, paired: bool,
                              stat: Statistic = np.mean, n_resamples: int = N_RESAMPLES,
                              seed: int = 0) -> Interval:
    """Relative change `stat(cand) / stat(base) - 1` with a 95% percentile interval.

    Paired resamples the same request indices in both runs (rows aligned by prompt); unpaired
    resamples each run on its own. A change of 0.10 means the candidate's statistic is 10% larger.
    """
    base, cand = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)

    def change(ib: np.ndarray, ic: np.ndarray) -> np.ndarray:
        return stat(cand[ic], axis=-1) / stat(base[ib], axis=-1) - 1

    return bootstrap_change(base.size, cand.size, change, paired, n_resamples, seed)


def bootstrap_ratio_of_sums_change(base_num: np.ndarray, base_den: np.ndarray, cand_num: np.ndarray,
                                   cand_den: np.ndarray, paired: bool, n_resamples: int = N_RESAMPLES,
                                   seed: int = 0) -> Interval:
    """Relative change of a ratio of sums, `R(cand) / R(base) - 1` with `R = sum(num) / sum(den)`.

    For the aggregate decode throughput num = completion_tokens - 1 and den = decode seconds per
    request, so R is tok/s with each request weighted by its decode time. Requests are resampled
    (paired: the same indices in both runs).
    """
    arrays = [np.asarray(a, dtype=float) for a in (base_num, base_den, cand_num, cand_den)]
    bn, bd, cn, cd = arrays

    def change(ib: np.ndarray, ic: np.ndarray) -> np.ndarray:
        ratio_base = bn[ib].sum(axis=-1) / bd[ib].sum(axis=-1)
        return cn[ic].sum(axis=-1) / cd[ic].sum(axis=-1) / ratio_base - 1

    return bootstrap_change(bn.size, cn.size, change, paired, n_resamples, seed)


def mean_interval(values: np.ndarray) -> Interval:
    """Mean of repeated runs' values with its 95% Student-t interval, `mean +/- t(0.975, n - 1) *
    s / sqrt(n)` (s: the sample standard deviation across runs). NaN bounds below two values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    from scipy.stats import t

    half = float(t.ppf((1 + CONFIDENCE) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def welch_relative_change(base: np.ndarray, cand: np.ndarray) -> Interval:
    """Relative change of the means of two sets of repeated runs, `mean(cand) / mean(base) - 1`,
    with the 95% Welch interval of the difference of means divided by `mean(base)`:
    `(d +/- t(0.975, nu) * se) / mean(base)`, `se = sqrt(s_b^2 / n_b + s_c^2 / n_c)`, nu by
    Welch-Satterthwaite. The baseline mean is taken as exact in the division (its own spread is in
    se). NaN bounds unless each side has two finite values; NaN throughout when the base mean is 0."""
    b, c = (np.asarray(a, dtype=float) for a in (base, cand))
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if b.size == 0 or c.size == 0 or b.mean() == 0:
        return math.nan, math.nan, math.nan
    point = float(c.mean() / b.mean() - 1)
    if b.size < 2 or c.size < 2:
        return point, math.nan, math.nan
    vb, vc = b.var(ddof=1) / b.size, c.var(ddof=1) / c.size
    se = math.sqrt(vb + vc)
    if se == 0:
        return point, point, point
    nu = (vb + vc) ** 2 / (vb**2 / (b.size - 1) + vc**2 / (c.size - 1))
    from scipy.stats import t

    half = float(t.ppf((1 + CONFIDENCE) / 2, nu) * se / abs(b.mean()))
    return point, point - half, point + half


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs of a paired 2x2 table.

    b = pairs right in the baseline only, c = right in the candidate only. Under "no change" each
    discordant pair is equally likely to fall either way, so b ~ Binomial(b + c, 1/2); the p-value
    is scipy's two-sided exact binomial test of b out of b + c at 1/2 (1.0 when b + c = 0).
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(int(b), int(b + c), 0.5, alternative="two-sided").pvalue)


def discordant_counts(correct_base: np.ndarray, correct_cand: np.ndarray) -> tuple[int, int]:
    """(b, c) of aligned per-question flags: b = right only in base, c = right only in cand."""
    base, cand = np.asarray(correct_base, dtype=bool), np.asarray(correct_cand, dtype=bool)
    if base.shape != cand.shape:
        raise ValueError("paired correctness needs the same questions in both runs")
    return int((base & ~cand).sum()), int((~base & cand).sum())


def accuracy_change(correct_base: np.ndarray, correct_cand: np.ndarray) -> Interval:
    """Paired accuracy difference `acc(cand) - acc(base)` (fraction) with a 95% interval.

    With n questions and discordant counts b (right only in base), c (right only in cand), the
    difference is d = (c - b) / n. The interval is Agresti and Min's (2005) adjusted Wald interval
    for matched proportions: add 1/2 to each of the four cells (n* = n + 2, b* = b + 1/2,
    c* = c + 1/2), then
        d* = (c* - b*) / n*,  se = sqrt((b* + c*) - (c* - b*)^2 / n*) / n*,  d* -/+ z se,
    z = 1.96. The adjustment keeps the interval from collapsing to a point when b = c = 0.
    """
    b, c = discordant_counts(correct_base, correct_cand)
    n = int(np.asarray(correct_base).size)
    if n == 0:
        return math.nan, math.nan, math.nan
    from scipy.stats import norm

    z = float(norm.ppf((1 + CONFIDENCE) / 2))
    n_adj, b_adj, c_adj = n + 2, b + 0.5, c + 0.5
    centre = (c_adj - b_adj) / n_adj
    se = math.sqrt((b_adj + c_adj) - (c_adj - b_adj) ** 2 / n_adj) / n_adj
    return (c - b) / n, max(-1.0, centre - z * se), min(1.0, centre + z * se)
