"""Server timings and speculative decoding on made-up meta objects (see docs/metrics.md): each
engine's fields, and NaN (never 1.0 or 0) where a figure is not reported."""

from __future__ import annotations

import math

import pytest

from harness.errors import SparkbenchError
from harness.metrics import derive_requests, summarize
from tests.unit.test_metrics import SPEC_COLUMNS, value

# ---- server timings -------------------------------------------------------------------------

def test_sglang_server_timings_are_seconds(derive_one):
    meta = {"first_token_latency": 0.095, "e2e_latency": 0.128}
    row = derive_one(chunks=[(100, 1), (110, 1), (120, 1), (130, 1)], end_ms=131, meta=meta)
    assert row["server_ttft_ms"] == pytest.approx(95.0)
    assert row["server_e2e_ms"] == pytest.approx(128.0)
    assert row["server_tpot_ms"] == pytest.approx(11.0)
    assert row["ttft_client_minus_server_ms"] == pytest.approx(5.0)
    assert row["e2e_client_minus_server_ms"] == pytest.approx(3.0)


def test_differences_hold_when_the_decode_is_longer_than_twice_the_first_token(derive_one):
    """The two cases above have every later figure under twice the earlier (where `a % b == a - b`):
    here the server's decode is 108 ms after a 20 ms first token, and the client's end 172 ms late."""
    meta = {"first_token_latency": 0.020, "e2e_latency": 0.128}
    row = derive_one(chunks=[(100, 1), (200, 1), (250, 1), (299, 1)], end_ms=300, meta=meta)
    assert row["server_tpot_ms"] == pytest.approx(36.0)
    assert row["ttft_client_minus_server_ms"] == pytest.approx(80.0)
    assert row["e2e_client_minus_server_ms"] == pytest.approx(172.0)


def test_vllm_server_timings(derive_one):
    meta = {"metrics": {"time_to_first_token_ms": 90.0, "generation_time_ms": 35.0}}
    row = derive_one(chunks=[(100, 1), (110, 2), (120, 1)], end_ms=126, engine="vllm", meta=meta)
    assert row["server_ttft_ms"] == 90.0
    assert row["server_e2e_ms"] == 125.0
    assert row["server_tpot_ms"] == pytest.approx(35 / 3)
    assert row["ttft_client_minus_server_ms"] == 10.0
    assert row["e2e_client_minus_server_ms"] == 1.0


@pytest.mark.parametrize("engine, meta", [
    ("sglang", {"e2e_latency": None}),
    ("sglang", {"first_token_latency": "soon"}),
    ("vllm", {"metrics": None}),
    ("vllm", {}),
    ("llamacpp", {"e2e_latency": 1.0}),
])
def test_missing_server_fields_give_nan(derive_one, engine, meta):
    row = derive_one(chunks=[(10, 1), (20, 1)], engine=engine, meta=meta)
    for column in ("server_ttft_ms", "server_e2e_ms", "server_tpot_ms",
                   "ttft_client_minus_server_ms", "e2e_client_minus_server_ms", *SPEC_COLUMNS):
        assert math.isnan(row[column]), column


def test_sglang_e2e_without_ttft(derive_one):
    row = derive_one(chunks=[(10, 1), (20, 1)], end_ms=21, meta={"e2e_latency": 0.02})
    assert row["server_e2e_ms"] == pytest.approx(20.0)
    assert math.isnan(row["server_ttft_ms"]) and math.isnan(row["server_tpot_ms"])


@pytest.mark.parametrize("raw", ["", "{}", "null", "[1, 2]"])
def test_empty_meta_gives_nan(derive_one, raw):
    row = derive_one(chunks=[(10, 1), (20, 1)], meta_json=raw)
    assert math.isnan(row["server_e2e_ms"]) and math.isnan(row["accept_length"])
    assert row["tpot_ms"] == 11.0


def test_corrupt_meta_is_an_error(make_record, frame_of):
    with pytest.raises(SparkbenchError, match="not valid JSON"):
        derive_requests(frame_of([make_record(meta_json="{trunc")]))


# ---- speculative decoding -------------------------------------------------------------------

def spec_chunks(total: int) -> list[tuple[float, int]]:
    """A first one-token chunk from prefill, then chunks of 4 tokens 10 ms apart."""
    chunks, made = [(100.0, 1)], 1
    while made < total:
        step = min(4, total - made)
        chunks.append((chunks[-1][0] + 10, step))
        made += step
    return chunks


def test_sglang_speculation_current_names(derive_one):
    meta = {"spec_verify_ct": 50, "spec_accept_length": 4.0, "spec_num_correct_drafts": 150,
            "spec_num_proposed_drafts": 200, "spec_accept_rate": 0.1}
    row = derive_one(chunks=spec_chunks(200), meta=meta)
    assert list(row[SPEC_COLUMNS]) == [4.0, 50.0, 150.0, 200.0, 0.75]  # rate from counts, not the field
    assert row["tokens_per_step"] == pytest.approx(200 / 51)
    assert row["tokens_per_step_source"] == "server_steps"
    assert row["tokens_per_chunk"] == pytest.approx(200 / 51)


def test_sglang_speculation_older_names_and_computed_length(derive_one):
    meta = {"spec_verify_ct": 40, "spec_accept_token_num": 90, "spec_draft_token_num": 120}
    row = derive_one(chunks=spec_chunks(130), meta=meta)
    assert list(row[SPEC_COLUMNS]) == [3.25, 40.0, 90.0, 120.0, 0.75]


def test_sglang_accept_rate_field_used_without_counts(derive_one):
    row = derive_one(chunks=spec_chunks(30), meta={"spec_verify_ct": 10, "spec_accept_rate": 0.6})
    assert row["accept_length"] == 3.0
    assert row["accept_rate"] == 0.6
    assert math.isnan(row["accepted_draft_tokens"])


@pytest.mark.parametrize("meta", [
    {},
    {"spec_verify_ct": 0, "spec_accept_length": 1.0, "spec_accept_rate": 0.0},
    {"spec_verify_ct": 0, "spec_accept_token_num": 0, "spec_draft_token_num": 0},
])
def test_no_speculation_is_nan_never_one_or_zero(derive_one, meta):
    row = derive_one(chunks=[(10, 1), (20, 1), (30, 1)], meta=meta)
    assert all(math.isnan(row[c]) for c in SPEC_COLUMNS)
    assert (row["tokens_per_step"], row["tokens_per_step_source"]) == (1.0, "stream_chunks")


def test_speculation_with_nothing_accepted_is_zero_not_nan(derive_one):
    meta = {"spec_verify_ct": 9, "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 27}
    row = derive_one(chunks=[(10 * i, 1) for i in range(1, 10)], meta=meta)
    assert row["accept_rate"] == 0.0
    assert row["accept_length"] == 1.0


def test_vllm_speculation(derive_one):
    spec = {"mean_acceptance_length": 3.5, "num_spec_steps": 20, "num_accepted_draft_tokens": 50,
            "num_draft_tokens": 60, "draft_acceptance_rate": 0.1, "acceptance_histogram": [1, 2]}
    row = derive_one(chunks=[(100, 1), (110, 3), (120, 2), (130, 4)], engine="vllm",
                     meta={"metrics": {"speculative_decoding": spec}})
    assert list(row[SPEC_COLUMNS]) == pytest.approx([3.5, 20.0, 50.0, 60.0, 50 / 60])
    # num_spec_steps counts only drafting steps: tokens per step comes from the stream.
    assert (row["tokens_per_step"], row["tokens_per_step_source"]) == (2.5, "stream_chunks")


def test_vllm_accept_length_from_counts(derive_one):
    spec = {"num_spec_steps": 8, "num_accepted_draft_tokens": 12, "num_draft_tokens": 24}
    meta = {"metrics": {"speculative_decoding": spec}}
    row = derive_one(chunks=[(10, 1), (20, 2)], engine="vllm", meta=meta)
    assert row["accept_length"] == 2.5
    assert row["accept_rate"] == 0.5


def test_sglang_middle_generation_draft_counts(derive_one):
    meta = {"spec_verify_ct": 10, "spec_accepted_drafts": 12, "spec_proposed_drafts": 30}
    row = derive_one(chunks=spec_chunks(22), meta=meta)
    assert list(row[SPEC_COLUMNS]) == [2.2, 10.0, 12.0, 30.0, 0.4]


def test_vllm_request_that_never_drafted_has_no_accept_length(make_record, frame_of):
    # vLLM reports an acceptance length of 1.0 for a request with no drafting step.
    never = {"mean_acceptance_length": 1.0, "num_spec_steps": 0, "num_accepted_draft_tokens": 0,
             "num_draft_tokens": 0, "draft_acceptance_rate": 0.0}
    drafted = {"num_spec_steps": 4, "num_accepted_draft_tokens": 8, "num_draft_tokens": 12}
    records = [make_record(seq=i, engine="vllm", chunks=[(10, 1), (20, 2)],
                           meta={"metrics": {"speculative_decoding": spec}})
               for i, spec in enumerate([never, drafted])]
    derived = derive_requests(frame_of(records))
    assert all(math.isnan(derived.loc[0, c]) for c in SPEC_COLUMNS)
    assert derived.loc[1, "accept_length"] == 3.0
    summary = summarize(frame_of(records), "r", "synthetic")
    assert value(summary, "accept_length_request_weighted") == 3.0  # the 1.0 stays out
    assert value(summary, "accept_length", "n") == 1


def test_vllm_without_speculation(derive_one):
    meta = {"metrics": {"time_to_first_token_ms": 9.0, "speculative_decoding": None}}
    row = derive_one(chunks=[(10, 1), (20, 1)], engine="vllm", meta=meta)
    assert all(math.isnan(row[c]) for c in SPEC_COLUMNS)


def test_run_accept_length_weighted_two_ways(make_record, frame_of):
    records = [
        make_record(seq=0, chunks=spec_chunks(100), meta={"spec_verify_ct": 50}),   # 2.0
        make_record(seq=1, chunks=spec_chunks(300), meta={"spec_verify_ct": 100}),  # 3.0
        make_record(seq=2, chunks=[(10, 1), (20, 1)]),                               # no speculation
    ]
    summary = summarize(frame_of(records), "r", "synthetic")
    assert value(summary, "accept_length_request_weighted") == 2.5
    assert value(summary, "accept_length_token_weighted") == pytest.approx(400 / 150)
    assert value(summary, "accept_length", "n") == 2


def test_run_without_speculation_has_nan_accept_length(make_record, frame_of):
    summary = summarize(frame_of([make_record(chunks=[(10, 1), (20, 1)])]), "r", "synthetic")
    assert math.isnan(value(summary, "accept_length_request_weighted"))
    assert math.isnan(value(summary, "accept_length_token_weighted"))
    assert value(summary, "accept_length", "n") == 0
    assert math.isnan(value(summary, "accept_length", "mean"))
