"""Output-length bins and the length-matched reweighting (`harness.metrics.normalize`) at their edges."""

from __future__ import annotations

import numpy as np
import pytest

from harness.metrics.normalize import length_bin_index, length_match_weights, length_matched_throughput

EDGES = [0, 10, 20]


def test_a_request_outside_the_edges_or_without_a_count_is_in_bin_minus_one():
    tokens = np.array([0, 9, 10, 19, 20, 500, np.nan, np.inf, -np.inf])
    assert length_bin_index(tokens, EDGES).tolist() == [0, 0, 1, 1, -1, -1, -1, -1, -1]


def test_a_run_request_outside_the_edges_weighs_nothing():
    weights, coverage = length_match_weights(np.array([5.0, 15.0, 500.0]), np.array([5.0, 15.0, 15.0, 15.0]), EDGES)
    assert weights.tolist() == [0.25, 0.75, 0.0] and coverage == 1.0


def test_two_token_requests_count_in_the_length_matched_aggregate(make_record, frame_of):
    """1 decoded token in 11 ms and 2 in 41 ms (first token to [DONE]): (1 + 2) / 0.052 s, not the
    3-token request's 2 / 0.041 s."""
    run = frame_of([make_record(chunks=[(100.0, 1), (110.0, 1)], seq=0),
                    make_record(chunks=[(100.0, 1), (120.0, 1), (140.0, 1)], seq=1)])
    table = length_matched_throughput(run, run, [0, 2.5, 10])
    aggregate = table[(table["metric"] == "decode_throughput_aggregate") & (table["stat"] == "length_matched")]
    assert aggregate["value"].iloc[0] == pytest.approx(3 / 0.052)
