"""Names and units of every derived column and summary metric (docs/metrics.md describes each)."""

from __future__ import annotations

SUMMARY_COLUMNS = ("run_id", "workload", "metric", "stat", "value", "unit")

# Columns derive_requests adds to the per-request table, in order.
DERIVED_COLUMNS = (
    "ttft_ms", "e2e_ms", "decode_ms", "tpot_ms", "decode_tok_s", "e2e_per_token_ms",
    "chunk_gaps_ms", "chunk_gap_tokens", "itl_ms", "tokens_per_chunk",
    "server_ttft_ms", "server_e2e_ms", "server_tpot_ms",
    "ttft_client_minus_server_ms", "e2e_client_minus_server_ms",
    "accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens", "accept_rate",
    "tokens_per_step", "tokens_per_step_source",
    "burst_share", "client_decode_share", "ttft_excess_ms",
    "buffered", "late_first_token", "sparse", "stream_flagged",
)

# Metrics summarized as distributions (stats n..max plus p95/p99 certification); value: unit.
DISTRIBUTION_UNITS = {
    "ttft_ms": "ms",
    "tpot_ms": "ms",
    "e2e_ms": "ms",
    "decode_ms": "ms",
    "e2e_per_token_ms": "ms/token",
    "decode_tok_s": "tok/s",
    "itl_ms": "ms",
    "chunk_gap_ms": "ms",
    "tokens_per_chunk": "tokens/chunk",
    "tokens_per_step": "tokens/step",
    "completion_tokens": "tokens",
    "prompt_tokens": "tokens",
    "cached_tokens": "tokens",
    "accept_length": "tokens/round",
    "accept_rate": "fraction",
    "server_ttft_ms": "ms",
    "server_e2e_ms": "ms",
    "server_tpot_ms": "ms",
    "ttft_client_minus_server_ms": "ms",
    "e2e_client_minus_server_ms": "ms",
}

# Metrics with one value per run (stat "value").
RUN_UNITS = {
    "requests": "count",
    "run_span_s": "s",
    "output_throughput": "tok/s",
    "decode_throughput_aggregate": "tok/s",
    "decode_throughput_mean_of_requests": "tok/s",
    "accept_length_request_weighted": "tokens/round",
    "accept_length_token_weighted": "tokens/round",
    "requests_flagged": "count",
    "requests_buffered": "count",
    "requests_late_first_token": "count",
    "requests_sparse": "count",
}

# Added when the table has a boolean `correct` column (GSM8K, joined from scoring).
CORRECTNESS_UNITS = {
    "correct_answers": "count",
    "accuracy": "fraction",
    "tokens_per_correct_answer": "tokens",
    "seconds_per_correct_answer": "s",
}

# Units of the stats that are not in the metric's own unit.
STAT_UNITS = {"n": "count", "p95_certified": "flag", "p99_certified": "flag"}
