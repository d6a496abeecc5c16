"""Metrics: pure functions of the per-request table (`harness.records.requests.load_requests`).

derive_requests adds per-request columns; summarize turns
them into the run's long summary table; by_length_bin and length_matched_throughput normalize for
output length. Functions named after a single run-level metric take the derived table.
docs/metrics.md defines every column.
"""

from harness.metrics.derive import derive_requests
from harness.metrics.normalize import (
                                       by_length_bin,
                                       length_match_weights,
                                       length_matched_throughput,
                                       seconds_per_correct_answer,
                                       tokens_per_correct_answer,
)
from harness.metrics.schema import DERIVED_COLUMNS, SUMMARY_COLUMNS
from harness.metrics.speculative import accept_length_request_weighted, accept_length_token_weighted
from harness.metrics.stats import describe, tail_certified
from harness.metrics.summary import (
                                       decode_throughput_aggregate,
                                       decode_throughput_mean_of_requests,
                                       output_throughput,
                                       summarize,
)

__all__ = [
    "DERIVED_COLUMNS",
    "SUMMARY_COLUMNS",
    "accept_length_request_weighted",
    "accept_length_token_weighted",
    "by_length_bin",
    "decode_throughput_aggregate",
    "decode_throughput_mean_of_requests",
    "derive_requests",
    "describe",
    "length_match_weights",
    "length_matched_throughput",
    "output_throughput",
    "seconds_per_correct_answer",
    "summarize",
    "tail_certified",
    "tokens_per_correct_answer",
]
