"""Prefix-cache hits of a run, from the server's own counts: per request (`cached_tokens`, SGLang's
meta_info or the OpenAI API's `usage.prompt_tokens_details`) and from its `/metrics` counters
where the engine exports them (vLLM's prefix-cache queries and hits)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.timeline import counter_increase
from harness.metrics.values import floats, ratio


def prefix_cache_hit_rate(derived: pd.DataFrame) -> float:
    """Prompt tokens served from the cache, fraction: `sum(cached_tokens) / sum(prompt_tokens)` over
    the requests whose server reported both; NaN when none did (not measured, never 0)."""
    cached, prompt = floats(derived["cached_tokens"]), floats(derived["prompt_tokens"])
    reported = np.isfinite(cached) & np.isfinite(prompt)
    if not reported.any():
        return math.nan
    return float(ratio(cached[reported].sum(), prompt[reported].sum()))


def counter_hit_rate(hits: np.ndarray, queries: np.ndarray) -> float:
    """Hits over queries of the server's prefix-cache counters, fraction: `increase(hits) /
    increase(queries)` over time-ordered readings; NaN with fewer than two, or no query."""
    return float(ratio(counter_increase(hits), counter_increase(queries)))
