"""Speed-up against a plain baseline on the same questions, the two ways the field reports it.

Spec-Bench times each request's whole generation (prefill included) and reports the mean of the
per-request tokens/s over the same mean of the baseline run; the aggregate view divides total
tokens by total request time in each run, so long answers weigh in proportion to their time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.metrics.values import floats, ratio


def request_tok_s(derived: pd.DataFrame) -> np.ndarray:
    """Per-request speed, tok/s: `completion_tokens / (e2e_ms / 1000)` (Spec-Bench's tokens/s of one
    request: prefill and decode together). NaN without a finite e2e."""
    return ratio(floats(derived["completion_tokens"]), derived["e2e_ms"].to_numpy(dtype=float) / 1000)


def request_time_parts(derived: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-request (completion_tokens, e2e seconds), 0/0 where either is missing: sums give the
    aggregate speed, tok/s."""
    tokens, seconds = floats(derived["completion_tokens"]), derived["e2e_ms"].to_numpy(dtype=float) / 1000
    keep = np.isfinite(tokens) & np.isfinite(seconds) & (seconds > 0)
    return np.where(keep, tokens, 0.0), np.where(keep, seconds, 0.0)


def speedup_mean_of_requests(base: pd.DataFrame, cand: pd.DataFrame) -> float:
    """Spec-Bench speed-up, ratio: `mean(request_tok_s(cand)) / mean(request_tok_s(base))`."""
    return float(np.nanmean(request_tok_s(cand)) / np.nanmean(request_tok_s(base)))


def speedup_aggregate(base: pd.DataFrame, cand: pd.DataFrame) -> float:
    """Aggregate speed-up, ratio: `(sum tokens / sum e2e s)(cand) / (sum tokens / sum e2e s)(base)`."""
    (bt, bs), (ct, cs) = request_time_parts(base), request_time_parts(cand)
    return float((ct.sum() / cs.sum()) / (bt.sum() / bs.sum()))
