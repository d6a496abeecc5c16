"""Properties every metric must keep, on generated requests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import (
    accept_length_token_weighted,
    decode_throughput_aggregate,
    derive_requests,
    describe,
    length_matched_throughput,
    summarize,
)

NS_PER_MS = 1_000_000


@st.composite
def request_shapes(draw):
    """(ttft ms, [(gap ms, new tokens)], tail ms to [DONE], first chunk tokens): one streamed request."""
    ttft = draw(st.floats(0, 5_000, allow_nan=False))
    first = draw(st.integers(1, 4))
    steps = draw(st.lists(st.tuples(st.floats(0, 200, allow_nan=False), st.integers(1, 5)), max_size=40))
    tail = draw(st.floats(0, 50, allow_nan=False))
    return ttft, first, steps, tail


def as_record(make_record, shape, seq=0, sent_ms=0.0, meta=None):
    ttft, first, steps, tail = shape
    chunks = [(sent_ms + ttft, first)]
    for gap, tokens in steps:
        chunks.append((chunks[-1][0] + gap, tokens))
    return make_record(seq=seq, sent_ms=sent_ms, chunks=chunks, end_ms=chunks[-1][0] + tail, meta=meta)


@settings(max_examples=150, deadline=None)
@given(shape=request_shapes())
def test_per_request_timings(make_record, frame_of, shape):
    record = as_record(make_record, shape)
    row = derive_requests(frame_of([record])).iloc[0]
    first_tokens = record.chunk_tokens[0]
    assert row["tokens_per_chunk"] >= 1
    if row["stream_flagged"]:  # a stream that hides its decode keeps no stream timing at all
        assert math.isnan(row["ttft_ms"]) and math.isnan(row["tpot_ms"]) and len(row["itl_ms"]) == 0
        return
    assert row["ttft_ms"] >= 0 and row["decode_ms"] >= 0
    assert row["e2e_ms"] == pytest.approx(row["ttft_ms"] + row["decode_ms"])
    if record.completion_tokens > 1:
        assert row["tpot_ms"] >= 0
    else:
        assert math.isnan(row["tpot_ms"])
    assert len(row["itl_ms"]) == record.completion_tokens - first_tokens
    assert sum(row["chunk_gap_tokens"]) == record.completion_tokens - first_tokens
    span_ms = (record.last_token_ns - record.first_token_ns) / NS_PER_MS
    assert sum(row["itl_ms"]) == pytest.approx(span_ms, rel=1e-9, abs=1e-6)
    assert sum(row["chunk_gaps_ms"]) == pytest.approx(span_ms, rel=1e-9, abs=1e-6)


@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_percentiles_are_ordered(values):
    stats = describe(values)
    assert stats["min"] <= stats["p50"] <= stats["p90"] <= stats["p95"] <= stats["p99"] <= stats["max"]
    assert stats["n"] == len(values)


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(request_shapes(), min_size=1, max_size=12))
def test_summary_percentiles_are_ordered(make_record, frame_of, shapes):
    df = frame_of([as_record(make_record, s, seq=i, sent_ms=100.0 * i) for i, s in enumerate(shapes)])
    summary = summarize(df, "r", "synthetic").set_index(["metric", "stat"])["value"]
    for metric in ("ttft_ms", "e2e_ms", "itl_ms", "chunk_gap_ms", "completion_tokens"):
        if summary[metric, "n"] == 0:  # one-chunk requests have no gaps
            continue
        p50, p95, p99 = (summary[metric, s] for s in ("p50", "p95", "p99"))
        assert p50 <= p95 <= p99, metric
    if summary["tpot_ms", "n"] > 0:
        assert summary["tpot_ms", "min"] >= 0


@st.composite
def speculating_requests(draw):
    """(completion tokens, verify rounds) of a SGLang request with speculation."""
    rounds = draw(st.integers(1, 500))
    tokens = draw(st.integers(rounds, 5 * rounds))
    return tokens, rounds


@settings(max_examples=100, deadline=None)
@given(requests=st.lists(speculating_requests(), min_size=1, max_size=20), report_length=st.booleans())
def test_token_weighted_accept_length_lies_between_requests(make_record, frame_of, requests, report_length):
    records = []
    for seq, (tokens, rounds) in enumerate(requests):
        meta = {"spec_verify_ct": rounds}
        if report_length:
            meta["spec_accept_length"] = tokens / rounds
        chunks = [(10.0, 1), (20.0, tokens - 1)] if tokens > 1 else [(10.0, 1)]
        records.append(make_record(seq=seq, chunks=chunks, meta=meta))
    derived = derive_requests(frame_of(records))
    weighted = accept_length_token_weighted(derived)
    lengths = derived["accept_length"]
    assert lengths.min() - 1e-9 <= weighted <= lengths.max() + 1e-9
    assert weighted == pytest.approx(sum(t for t, _ in requests) / sum(r for _, r in requests))


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(request_shapes(), min_size=1, max_size=12))
def test_length_matching_a_run_to_itself_changes_nothing(make_record, frame_of, shapes):
    df = frame_of([as_record(make_record, s, seq=i) for i, s in enumerate(shapes)])
    edges = [0, 4, 16, 64, 1024]
    matched = length_matched_throughput(df, df, edges).set_index("metric")["value"]
    plain = decode_throughput_aggregate(derive_requests(df))
    assert matched["target_coverage"] == 1.0
    if math.isnan(plain):
        assert math.isnan(matched["decode_throughput_aggregate"])
    else:
        assert matched["decode_throughput_aggregate"] == pytest.approx(plain)
    assert matched["completion_tokens"] == pytest.approx(np.mean(df["completion_tokens"]))
