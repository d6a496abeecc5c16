"""Prefix-cache hit figures: cached over prompt tokens of the requests the server reported, and the
increase of its hit counter over that of its query counter; not measured, never 0, without counts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.prefix_cache import counter_hit_rate, prefix_cache_hit_rate


def test_the_hit_rate_counts_only_requests_whose_server_reported_cached_tokens():
    table = pd.DataFrame({"cached_tokens": [40, None, 0, 20], "prompt_tokens": [48, 1000, 48, 48]})
    assert prefix_cache_hit_rate(table) == 60 / 144  # the unreported request's 1000 tokens are left out


def test_no_reported_count_is_not_measured_rather_than_no_hit():
    assert math.isnan(prefix_cache_hit_rate(pd.DataFrame({"cached_tokens": [None, None], "prompt_tokens": [8, 8]})))


def test_the_counter_rate_is_the_increase_of_hits_over_that_of_queries_across_a_restart():
    hits, queries = np.array([100.0, 130.0, 10.0]), np.array([400.0, 460.0, 40.0])  # restarted before the last
    assert counter_hit_rate(hits, queries) == (30 + 10) / (60 + 40)
    assert math.isnan(counter_hit_rate(np.array([5.0]), np.array([9.0])))  # one reading: no increase
    assert math.isnan(counter_hit_rate(np.array([5.0, 5.0]), np.array([9.0, 9.0])))  # no query in the window
