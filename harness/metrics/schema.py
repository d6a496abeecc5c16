"""Names and units of every derived column and summary metric (docs/metrics.md describes each)."""

from __future__ import annotations

from harness.metrics.catalogue import CORRECTNESS, DISTRIBUTION, RUN, units

SUMMARY_COLUMNS = ("run_id", "workload", "metric", "stat", "value", "unit")

# Columns derive_requests adds to the per-request table, in order.
DERIVED_COLUMNS = (
    "ttft_ms", "ttfat_ms", "reasoning_tokens", "e2e_ms", "decode_ms", "tpot_ms", "decode_tok_s", "e2e_per_token_ms",
    "send_lag_ms", "response_ttft_ms", "response_e2e_ms",
    "chunk_gaps_ms", "chunk_gap_tokens", "itl_ms", "tokens_per_chunk",
    "server_ttft_ms", "server_e2e_ms", "server_tpot_ms",
    "ttft_client_minus_server_ms", "e2e_client_minus_server_ms",
    "accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens", "accept_rate",
    "tokens_per_step", "tokens_per_step_source",
    "burst_share", "client_decode_share", "ttft_excess_ms", "first_token_stall_ms", "noise_floor_ms",
    "buffered", "late_first_token", "sparse", "client_stalled", "stream_flagged",
)

# Units of the summary metrics by kind, in catalogue order (harness.metrics.catalogue states them).
DISTRIBUTION_UNITS = units(DISTRIBUTION)  # summarized as distributions: stats n..max, certification flags
RUN_UNITS = units(RUN)  # one value per run (stat "value")
CORRECTNESS_UNITS = units(CORRECTNESS)  # added when the table has a boolean `correct` column

# Units of the stats that are not in the metric's own unit.
STAT_UNITS = {"n": "count", "p95_certified": "flag", "p99_certified": "flag"}
