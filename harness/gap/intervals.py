"""The gap's intervals: a BCa bootstrap over prompts, and the prompts each kind of interval needs.

`bootstrap_intervals` hands `scipy.stats.bootstrap` one sample per content, the positions of its
prompts (0..n-1); the statistic indexes every cell of that content with the same resampled
positions, so a content's prompts are resampled jointly across its cells, and each content
independently of the others (multi-sample, unpaired between contents).

`MIN_PROMPTS` is what the coverage simulation (`scripts/gap_coverage.py`; table and settings in
docs/gap.md) measured: per kind of interval, the fewest prompts per content at which every
interval of that kind covered its true value in at least 90% of 1,000 replications at nominal
95%. A kind not reaching 90% at the largest size simulated needs more than `LARGEST_SIMULATED`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from harness.analysis.stats import CONFIDENCE, N_RESAMPLES

LARGEST_SIMULATED = 192
SPEEDUP, TOKENS, REQUESTS = "speedup", "accept_length_token_weighted", "accept_length_request_weighted"
# figure -> prompts per content a cell's interval needs; (figure, share kind) -> an attribution share's.
# Measured 2026-12-07 (docs/gap.md, "Coverage of the intervals"): sizes 6, 12, 24, 48, 96, 192.
MIN_PROMPTS: dict[str | tuple[str, str], int] = {
    SPEEDUP: 24, TOKENS: 24, REQUESTS: 24,
    (SPEEDUP, "delta"): 24, (SPEEDUP, "one_at_a_time"): 24, (SPEEDUP, "interaction"): 24, (SPEEDUP, "shapley"): 12,
    (TOKENS, "delta"): 12, (TOKENS, "one_at_a_time"): 12, (TOKENS, "interaction"): 12, (TOKENS, "shapley"): 12,
    (REQUESTS, "delta"): 24, (REQUESTS, "one_at_a_time"): 24, (REQUESTS, "interaction"): 12, (REQUESTS, "shapley"): 12,
}


def share_kind(share: str) -> str:
    """"shapley", "one_at_a_time", "interaction" or "delta": the kinds the simulation tells apart."""
    return "interaction" if share.endswith("interaction") else share.split(":")[0]


def needed_prompts(figure: str, share: str | None = None) -> int:
    """Prompts per content an interval of this kind needs (LARGEST_SIMULATED + 1 where unknown)."""
    key = figure if share is None else (figure, share_kind(share))
    return MIN_PROMPTS.get(key, LARGEST_SIMULATED + 1)


def bootstrap_intervals(statistic: Callable[..., np.ndarray], sizes: dict[str, int],
                        n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(point, low, high), one entry per output of `statistic(*positions)`: the point on the prompts as
    sent, and the 95% BCa interval (NaN where it cannot be formed: a degenerate or non-finite
    resample distribution, or a content of one prompt)."""
    from scipy.stats import bootstrap

    samples = tuple(np.arange(n) for n in sizes.values())
    with np.errstate(divide="ignore", invalid="ignore"):
        point = np.asarray(statistic(*samples), dtype=float)
    if min(sizes.values(), default=0) < 2:
        return point, np.full_like(point, math.nan), np.full_like(point, math.nan)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        result = bootstrap(samples, statistic, n_resamples=n_resamples, confidence_level=CONFIDENCE,
                           method="BCa", vectorized=True, paired=False, random_state=np.random.default_rng(seed))
    low, high = (np.asarray(bound, dtype=float) for bound in result.confidence_interval)
    return point, low, high
