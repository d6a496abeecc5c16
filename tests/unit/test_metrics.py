"""Every metric definition on made-up timestamps (see docs/metrics.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.metrics import (
    DERIVED_COLUMNS,
    by_length_bin,
    derive_requests,
    describe,
    length_matched_throughput,
    summarize,
    tail_certified,
)
from harness.metrics.stats import weighted_mean, wilson_interval
from harness.records.requests import RecordWriter, load_requests, write_parquet

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"

EXPECTED_DERIVED = {
    "ttft_ms", "ttfat_ms", "reasoning_tokens", "e2e_ms", "decode_ms", "tpot_ms", "decode_tok_s", "e2e_per_token_ms",
    "chunk_gaps_ms", "chunk_gap_tokens", "itl_ms", "tokens_per_chunk",
    "send_lag_ms", "response_ttft_ms", "response_e2e_ms",
    "server_ttft_ms", "server_e2e_ms", "server_tpot_ms",
    "ttft_client_minus_server_ms", "e2e_client_minus_server_ms",
    "accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens",
    "accept_rate", "tokens_per_step", "tokens_per_step_source",
    "burst_share", "client_decode_share", "ttft_excess_ms", "first_token_stall_ms", "noise_floor_ms",
    "buffered", "late_first_token", "sparse", "client_stalled", "stream_flagged",
}
EXPECTED_DISTRIBUTIONS = {
    "ttft_ms", "ttfat_ms", "reasoning_tokens", "tpot_ms", "e2e_ms", "decode_ms", "e2e_per_token_ms", "decode_tok_s", "itl_ms",
    "chunk_gap_ms", "tokens_per_chunk", "tokens_per_step", "completion_tokens", "prompt_tokens",
    "cached_tokens", "accept_length", "accept_rate", "server_ttft_ms", "server_e2e_ms",
    "server_tpot_ms", "ttft_client_minus_server_ms", "e2e_client_minus_server_ms",
    "send_lag_ms", "response_ttft_ms", "response_e2e_ms",
}
EXPECTED_RUN_VALUES = {
    "requests", "run_span_s", "output_throughput", "decode_throughput_aggregate",
    "decode_throughput_mean_of_requests", "accept_length_request_weighted",
    "accept_length_token_weighted", "prefix_cache_hit_rate",
    "requests_flagged", "requests_buffered", "requests_late_first_token", "requests_sparse",
    "requests_client_stalled",
    "requests_ok", "requests_failed", "error_rate", "errors_disconnected", "errors_http_status",
    "errors_redirect", "errors_malformed_chunk", "errors_no_done", "errors_timeout", "errors_first_token_timeout", "errors_aborted",
    "errors_no_tokens", "errors_short_output", "errors_impossible_count", "offered_rate_rps", "achieved_rate_rps",
    "completed_rate_rps", "requests_late",
}
EXPECTED_CORRECTNESS = {
    "correct_answers", "accuracy", "tokens_per_correct_answer", "seconds_per_correct_answer",
}
EXPECTED_STATS = [
    "n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "p95_certified", "p99_certified",
]
SPEC_COLUMNS = [
    "accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens", "accept_rate",
]


def value(summary: pd.DataFrame, metric: str, stat: str = "value") -> float:
    rows = summary[(summary["metric"] == metric) & (summary["stat"] == stat)]
    assert len(rows) == 1, f"{metric}/{stat}: {len(rows)} rows"
    return float(rows["value"].iloc[0])


# ---- client timings -------------------------------------------------------------------------

def test_one_token_per_chunk(derive_one):
    row = derive_one(chunks=[(100, 1), (110, 1), (120, 1), (130, 1)], end_ms=131)
    assert row["ttft_ms"] == 100.0
    assert row["e2e_ms"] == 131.0
    assert row["decode_ms"] == 31.0
    assert row["tpot_ms"] == pytest.approx(31 / 3)
    assert row["decode_tok_s"] == pytest.approx(3000 / 31)
    assert row["e2e_per_token_ms"] == pytest.approx(131 / 4)
    assert row["chunk_gaps_ms"] == [10.0, 10.0, 10.0]
    assert row["chunk_gap_tokens"] == [1, 1, 1]
    assert row["itl_ms"] == [10.0, 10.0, 10.0]
    assert row["tokens_per_chunk"] == 1.0
    assert (row["tokens_per_step"], row["tokens_per_step_source"]) == (1.0, "stream_chunks")


def test_derived_figures_are_numeric_columns_and_per_request_lists_are_one_list_a_cell(make_record, frame_of):
    """Downstream arithmetic (pooling, quantiles, parquet) needs float columns, not objects."""
    derived = derive_requests(frame_of([make_record(chunks=[(100, 1), (110, 1), (125, 1)], end_ms=126),
                                        make_record(chunks=[(90, 1), (100, 2)], end_ms=101)]))
    for name in ("ttft_ms", "tpot_ms", "decode_tok_s", "tokens_per_chunk"):
        assert pd.api.types.is_float_dtype(derived[name]), (name, derived[name].dtype)
    assert derived["chunk_gaps_ms"].dtype == object
    assert derived["chunk_gaps_ms"].tolist() == [[10.0, 15.0], [10.0]]


def test_multi_token_chunks_spread_their_gap_over_their_tokens(derive_one):
    row = derive_one(chunks=[(50, 1), (70, 3), (80, 2)], end_ms=90)
    assert row["chunk_gaps_ms"] == [20.0, 10.0]
    assert row["chunk_gap_tokens"] == [3, 2]
    assert row["itl_ms"] == pytest.approx([20 / 3] * 3 + [5.0, 5.0])
    assert len(row["itl_ms"]) == 6 - 1  # completion tokens minus the first chunk's
    assert row["tpot_ms"] == pytest.approx(40 / 5)
    assert row["tokens_per_chunk"] == 2.0


def test_first_chunk_with_several_tokens_is_left_out_of_itl(derive_one):
    row = derive_one(chunks=[(30, 4), (40, 2)])
    assert row["itl_ms"] == [5.0, 5.0]
    assert row["tokens_per_chunk"] == 3.0


def test_assumed_chunk_counts_give_no_itl(derive_one):
    # The server sent no running usage: the client counted one token per text chunk and said so.
    meta = {"chunk_token_counts": "assumed_one_per_chunk"}
    row = derive_one(chunks=[(10, 1), (20, 1), (30, 1)], completion_tokens=6, end_ms=35,
                     engine="vllm", meta=meta)
    assert row["chunk_gaps_ms"] == [10.0, 10.0]
    assert row["chunk_gap_tokens"] == [] and row["itl_ms"] == []
    assert row["tokens_per_chunk"] == 2.0
    assert row["tpot_ms"] == 5.0


def test_one_token_output_has_no_decode_rate(derive_one):
    row = derive_one(chunks=[(25, 1)], end_ms=27)
    assert row["ttft_ms"] == 25.0
    assert row["decode_ms"] == 2.0
    assert math.isnan(row["tpot_ms"]) and math.isnan(row["decode_tok_s"])
    assert row["chunk_gaps_ms"] == [] and row["itl_ms"] == []
    assert row["e2e_per_token_ms"] == 27.0


def test_empty_text_chunk_still_counts_as_tokens(derive_one):
    # A multi-byte character held back: the first token-bearing chunk has no text, yet it is TTFT.
    row = derive_one(chunks=[(40, 1), (55, 1), (60, 1)], texts=["", "\u00e9", "a"], end_ms=61)
    assert row["ttft_ms"] == 40.0
    assert row["chunk_gaps_ms"] == [15.0, 5.0]
    assert row["itl_ms"] == [15.0, 5.0]


def test_request_without_tokens(derive_one):
    row = derive_one(chunks=[], completion_tokens=0, end_ms=7)
    assert math.isnan(row["ttft_ms"]) and math.isnan(row["tpot_ms"]) and math.isnan(row["e2e_per_token_ms"])
    assert row["e2e_ms"] == 7.0
    assert math.isnan(row["tokens_per_chunk"]) and math.isnan(row["tokens_per_step"])
    assert row["tokens_per_step_source"] is None


def test_tpot_uses_server_count_not_chunks(derive_one):
    # The server's completion_tokens is the token count, whatever the chunks suggest.
    row = derive_one(chunks=[(10, 1), (20, 1)], completion_tokens=11, end_ms=30)
    assert row["tpot_ms"] == 2.0


def test_large_stamps_keep_nanosecond_precision(derive_one):
    row = derive_one(chunks=[(0.000001, 1), (0.000002, 1)], sent_ms=0.0, end_ms=0.000003)
    assert row["ttft_ms"] == 1e-6
    assert row["e2e_ms"] == 3e-6


# ---- statistics -----------------------------------------------------------------------------

def test_describe_uses_linear_interpolation():
    stats = describe([4.0, 1.0, 3.0, 2.0, np.nan])
    assert stats["n"] == 4
    assert stats["p50"] == 2.5
    assert stats["p90"] == pytest.approx(3.7)
    assert stats["p99"] == pytest.approx(3.97)
    assert stats["std"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))


def test_describe_drops_infinities_and_states_every_stat():
    stats = describe([4.0, 1.0, 3.0, 2.0, np.inf, -np.inf])
    assert (stats["n"], stats["mean"], stats["min"], stats["max"]) == (4, 2.5, 1.0, 4.0)
    assert stats["p95"] == pytest.approx(3.85)  # position 0.95 * 3 = 2.85: 3 + 0.85 * (4 - 3)
    one = describe([5.0])
    assert (one["n"], one["mean"], one["p99"]) == (1, 5.0, 5.0) and math.isnan(one["std"])


def test_weighted_mean_keeps_finite_values_of_positive_weight():
    values = np.array([1.0, 2.0, np.nan, 4.0, 10.0, 100.0])
    weights = np.array([1.0, 3.0, 5.0, 0.0, -2.0, -0.5])
    assert weighted_mean(values, weights) == pytest.approx(7 / 4)  # (1 * 1 + 2 * 3) / (1 + 3)
    assert math.isnan(weighted_mean(np.array([1.0, np.nan]), np.array([0.0, 2.0])))


def test_wilson_interval_at_another_confidence_is_scipys():
    from scipy import stats

    expected = stats.binomtest(3, 10).proportion_ci(confidence_level=0.99, method="wilson")
    assert wilson_interval(3, 10, confidence=0.99) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_wilson_interval_stays_inside_zero_and_one_where_rounding_would_step_out():
    """At p = 0 the low end is 0 and at p = 1 the high end is 1 exactly in arithmetic; in floats
    n = 2 puts the first an ulp below 0 and n = 9 the second an ulp above 1."""
    assert wilson_interval(0, 2)[0] == 0.0 and wilson_interval(9, 9)[1] == 1.0


def test_describe_of_nothing():
    stats = describe([])
    assert stats["n"] == 0 and all(math.isnan(v) for k, v in stats.items() if k != "n")


@pytest.mark.parametrize("q, minimum", [(0.5, 11), (0.9, 64), (0.95, 130), (0.99, 662)])
def test_tail_certified_matches_mlperf_minimums(q, minimum):
    assert tail_certified(minimum, q)
    assert not tail_certified(minimum - 1, q)


# ---- speculation -----------------------------------------------------------------------------

def test_run_accept_lengths_weigh_requests_by_their_rounds_or_alike():
    import warnings

    from harness.metrics.speculative import accept_length_request_weighted, accept_length_token_weighted

    # Tokens: 2 x 5, 3 x 10 and 5 x 1 over 16 rounds = 45 / 16; the requests without rounds, of 0
    # rounds, or of rounds without a length add nothing. Request-weighted: the mean of 2, 3, 5 and
    # the 4 of no rounds.
    derived = pd.DataFrame({"accept_length": [2.0, 3.0, np.nan, 4.0, 5.0, np.nan],
                            "verify_rounds": [5.0, 10.0, np.nan, 0.0, 1.0, 3.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the request of 0 rounds is left out, not divided by
        assert accept_length_token_weighted(derived) == pytest.approx(45 / 16)
    assert accept_length_request_weighted(derived) == pytest.approx(3.5)
    one_round = pd.DataFrame({"accept_length": [3.0], "verify_rounds": [1.0]})
    assert accept_length_token_weighted(one_round) == 3.0
    none = pd.DataFrame({"accept_length": [np.nan], "verify_rounds": [np.nan]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no rounds: NaN, not 0 / 0
        assert math.isnan(accept_length_token_weighted(none)) and math.isnan(accept_length_request_weighted(none))


def test_tokens_per_step_take_the_servers_steps_else_the_streams_chunks_without_a_warning():
    import warnings

    from harness.metrics.speculative import tokens_per_step

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a request without server steps divides by nothing
        values, sources = tokens_per_step(np.array([10.0, 8.0, 6.0, 4.0]), np.array([5.0, 0.0, 1.0, 0.0]),
                                          np.array([np.nan, 2.0, 3.0, np.nan]))
    assert values[:3].tolist() == [2.0, 2.0, 6.0] and math.isnan(values[3])
    assert sources == ["server_steps", "stream_chunks", "server_steps", None]


# ---- summary --------------------------------------------------------------------------------

def test_decode_throughput_counts_only_requests_with_two_tokens_and_a_decode_time():
    from harness.metrics.summary import decode_throughput_aggregate, decode_throughput_parts

    derived = pd.DataFrame({"completion_tokens": [5.0, 1.0, 3.0, 9.0, 0.0],
                            "decode_ms": [400.0, 50.0, np.nan, 400.0, 50.0]})
    tokens, seconds = decode_throughput_parts(derived)
    assert tokens.tolist() == [4.0, 0.0, 0.0, 8.0, 0.0] and seconds.tolist() == [0.4, 0.0, 0.0, 0.4, 0.0]
    assert decode_throughput_aggregate(derived) == pytest.approx(12 / 0.8)


def test_a_pooled_metric_of_no_requests_has_no_samples():
    from harness.metrics.summary import distribution_samples

    assert distribution_samples(pd.DataFrame({"itl_ms": []}), "itl_ms").size == 0


def test_outcomes_of_a_table_without_status_columns_are_all_ok():
    from harness.metrics.summary import outcome_values

    values = outcome_values(pd.DataFrame({"prompt_id": ["a", "b", "c"]}))
    assert (values["requests"], values["requests_ok"], values["requests_failed"], values["error_rate"]) == (3, 3, 0, 0)
    assert {v for k, v in values.items() if k.startswith("errors_")} == {0.0}
    assert math.isnan(outcome_values(pd.DataFrame({"prompt_id": []}))["error_rate"])


@pytest.fixture
def three_requests(make_record, frame_of):
    """TTFT 100/200/400 ms; 11, 21 and 2 tokens one per chunk at 10/5/30 ms; [DONE] 1 ms later."""
    records = [
        make_record(seq=0, chunks=[(100 + 10 * i, 1) for i in range(11)]),  # decode 101 ms, 10 tokens
        make_record(seq=1, sent_ms=50, chunks=[(250 + 5 * i, 1) for i in range(21)]),  # decode 101 ms, 20
        make_record(seq=2, sent_ms=100, chunks=[(500, 1), (530, 1)]),  # decode 31 ms, 1 token
    ]
    return frame_of(records)


def test_summary_shape_is_locked(three_requests):
    summary = summarize(three_requests, "run-1", "synthetic")
    assert list(summary.columns) == ["run_id", "workload", "metric", "stat", "value", "unit"]
    assert set(summary["metric"]) == EXPECTED_DISTRIBUTIONS | EXPECTED_RUN_VALUES
    for metric in EXPECTED_DISTRIBUTIONS:
        assert list(summary.loc[summary["metric"] == metric, "stat"]) == EXPECTED_STATS, metric
    for metric in EXPECTED_RUN_VALUES:
        assert list(summary.loc[summary["metric"] == metric, "stat"]) == ["value"], metric
    assert set(summary["run_id"]) == {"run-1"} and set(summary["workload"]) == {"synthetic"}


def test_derived_columns_are_locked(three_requests):
    derived = derive_requests(three_requests)
    assert set(DERIVED_COLUMNS) == EXPECTED_DERIVED
    assert list(derived.columns) == list(three_requests.columns) + list(DERIVED_COLUMNS)


def test_docs_define_every_name():
    documented = set(re.findall(r"`([a-z0-9_]+)`", DOCS.read_text(encoding="utf-8")))
    names = EXPECTED_DERIVED | EXPECTED_DISTRIBUTIONS | EXPECTED_RUN_VALUES | EXPECTED_CORRECTNESS
    assert names - documented == set()


def test_summary_numbers(three_requests):
    summary = summarize(three_requests, "run-1", "synthetic")
    assert value(summary, "ttft_ms", "mean") == pytest.approx(700 / 3)
    assert value(summary, "ttft_ms", "p50") == 200.0
    assert value(summary, "ttft_ms", "p90") == pytest.approx(360.0)
    assert value(summary, "ttft_ms", "std") == pytest.approx(np.std([100, 200, 400], ddof=1))
    assert value(summary, "ttft_ms", "n") == 3
    assert value(summary, "ttft_ms", "p99_certified") == 0.0
    assert value(summary, "tpot_ms", "max") == 31.0
    assert value(summary, "itl_ms", "n") == 10 + 20 + 1
    assert value(summary, "itl_ms", "max") == 30.0
    assert value(summary, "chunk_gap_ms", "min") == 5.0
    assert value(summary, "completion_tokens", "p50") == 11
    assert value(summary, "requests") == 3
    assert value(summary, "run_span_s") == pytest.approx(0.531)
    assert value(summary, "output_throughput") == pytest.approx(34 / 0.531)
    assert value(summary, "decode_throughput_aggregate") == pytest.approx(31 / 0.233)
    assert value(summary, "decode_throughput_mean_of_requests") == pytest.approx(
        np.mean([10 / 0.101, 20 / 0.101, 1 / 0.031]))
    units = summary.set_index(["metric", "stat"])["unit"]
    assert units["ttft_ms", "p95"] == "ms"
    assert (units["ttft_ms", "n"], units["ttft_ms", "p95_certified"]) == ("count", "flag")
    assert units["decode_throughput_aggregate", "value"] == "tok/s"


def test_summary_certifies_p95_from_130_requests(make_record, frame_of):
    records = [make_record(seq=i, chunks=[(10 + i, 1), (20 + i, 1)]) for i in range(130)]
    summary = summarize(frame_of(records), "r", "synthetic")
    assert value(summary, "ttft_ms", "p95_certified") == 1.0
    assert value(summary, "ttft_ms", "p99_certified") == 0.0
    assert value(summary, "itl_ms", "p95_certified") == 1.0


def test_parquet_and_jsonl_give_the_same_metrics(tmp_path, make_record):
    writer = RecordWriter(tmp_path)
    writer.append(make_record(seq=0, chunks=[(100, 1), (120, 3)], meta={"spec_verify_ct": 1}))
    writer.append(make_record(seq=1, chunks=[], completion_tokens=0))
    writer.close()
    from_jsonl = derive_requests(load_requests(tmp_path))
    write_parquet(tmp_path)
    from_parquet = derive_requests(load_requests(tmp_path))
    for column in ("ttft_ms", "tpot_ms", "tokens_per_step", "accept_length"):
        np.testing.assert_array_equal(from_parquet[column].to_numpy(float),
                                      from_jsonl[column].to_numpy(float))
    assert from_parquet["itl_ms"].iloc[0] == from_jsonl["itl_ms"].iloc[0] == [20 / 3] * 3


def timed_request(make_record, seq: int, tokens: int, decode_ms: float):
    """`tokens` one-token chunks, first at 10 ms, spread evenly over `decode_ms` until [DONE]."""
    step = decode_ms / tokens
    return make_record(seq=seq, chunks=[(10 + step * i, 1) for i in range(tokens)], end_ms=10 + decode_ms)


def test_by_length_bin(make_record, frame_of):
    df = frame_of([timed_request(make_record, 0, 11, 100), timed_request(make_record, 1, 101, 2000),
                   timed_request(make_record, 2, 21, 100)])
    table = by_length_bin(df, [0, 64, 512, 4096])
    assert list(table.columns) == ["bin", "metric", "stat", "value", "unit"]
    n = table[(table["metric"] == "tpot_ms") & (table["stat"] == "n")].set_index("bin")["value"]
    assert n.to_dict() == {"[0, 64)": 2.0, "[64, 512)": 1.0, "[512, 4096)": 0.0}
    tpot = table[(table["metric"] == "tpot_ms") & (table["stat"] == "mean")].set_index("bin")["value"]
    assert tpot["[0, 64)"] == pytest.approx((10 + 5) / 2)
    assert tpot["[64, 512)"] == pytest.approx(20.0)


def test_length_matched_throughput(make_record, frame_of):
    short = [timed_request(make_record, i, 11, 100) for i in range(3)]     # 100 tok/s each
    long_ = [timed_request(make_record, 3, 101, 2000)]                     # 50 tok/s
    run = frame_of(short + long_)
    target = frame_of([timed_request(make_record, 0, 10, 50)]
                      + [timed_request(make_record, i, 200, 50) for i in range(3)])
    table = length_matched_throughput(run, target, [0, 64, 512]).set_index("metric")
    # Short bin weighs 1/4 (split over 3 requests), long bin 3/4.
    assert table.loc["decode_throughput_aggregate", "value"] == pytest.approx(77.5 / 1.525)
    assert table.loc["decode_throughput_mean_of_requests", "value"] == pytest.approx(62.5)
    assert table.loc["completion_tokens", "value"] == pytest.approx(0.25 * 11 + 0.75 * 101)
    assert table.loc["target_coverage", "value"] == 1.0
    assert set(table["stat"]) == {"length_matched", "value"}


def test_length_matched_coverage_when_run_lacks_a_bin(make_record, frame_of):
    run = frame_of([timed_request(make_record, 0, 11, 100)])
    target = frame_of([timed_request(make_record, 0, 11, 50), timed_request(make_record, 1, 200, 50)])
    table = length_matched_throughput(run, target, [0, 64, 512]).set_index("metric")
    assert table.loc["target_coverage", "value"] == 0.5
    assert table.loc["decode_throughput_aggregate", "value"] == pytest.approx(100.0)


def test_cost_per_correct_answer(make_record, frame_of):
    df = frame_of([timed_request(make_record, i, 11, 100) for i in range(4)])
    df["correct"] = [True, False, True, None]
    summary = summarize(df, "r", "gsm8k")
    assert set(summary["metric"]) >= EXPECTED_CORRECTNESS
    assert value(summary, "correct_answers") == 2
    assert value(summary, "accuracy") == pytest.approx(2 / 3)
    assert value(summary, "tokens_per_correct_answer") == 22.0
    assert value(summary, "seconds_per_correct_answer") == pytest.approx(4 * 0.11 / 2)


def test_no_correct_answer_gives_nan_cost(make_record, frame_of):
    df = frame_of([timed_request(make_record, 0, 11, 100)])
    df["correct"] = [False]
    summary = summarize(df, "r", "gsm8k")
    assert value(summary, "accuracy") == 0.0
    assert math.isnan(value(summary, "tokens_per_correct_answer"))
    assert math.isnan(value(summary, "seconds_per_correct_answer"))


def test_failed_requests_are_counted_and_kept_out_of_every_timing(three_requests):
    failed = three_requests.copy()
    failed.loc[1, ["status", "error_kind", "error_message"]] = ["error", "no_done", "stream ended without [DONE]"]
    summary = summarize(failed, "run-1", "synthetic").set_index(["metric", "stat"])["value"]
    ok_only = summarize(three_requests.drop(index=1), "run-1", "synthetic").set_index(["metric", "stat"])["value"]
    assert (summary["requests", "value"], summary["requests_ok", "value"], summary["requests_failed", "value"]) == \
        (3, 2, 1)
    assert summary["errors_no_done", "value"] == 1 and summary["error_rate", "value"] == 1 / 3
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert summary[metric, "mean"] == ok_only[metric, "mean"]
    assert summary["decode_throughput_aggregate", "value"] == ok_only["decode_throughput_aggregate", "value"]
