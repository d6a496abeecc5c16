"""An open loop against a server that cannot keep up, on made-up records: the completion rate beside
the send rate, and the overload warning from the records (completions short of arrivals, TTFT rising)
or from the server's queued gauge; a server that keeps up raises none. And the lag warning says the
load was lighter only when fewer requests were sent per second than were offered."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.analysis.run import Run
from harness.analysis.tables import format_run_summary
from harness.metrics import derive_requests, summarize
from harness.metrics.load import lag_warning
from harness.metrics.overload import completions_and_arrivals, overload_warning, ttft_growth
from tests.unit.conftest import build_record, to_frame
from tests.unit.test_report import SYNTHETIC, write_run
from tests.unit.test_slo_metrics import due

GAP_MS = 50.0  # 20 requests/s offered


def fifo_records(count: int, service_ms: float) -> list:
    """`count` requests due GAP_MS apart, each sent on time to a one-at-a-time FIFO server that takes
    `service_ms`: request i starts when it is due or when request i - 1 ends, whichever is later."""
    records, free_at = [], 0.0
    for i in range(count):
        start = max(i * GAP_MS, free_at)
        free_at = start + service_ms
        record = build_record(chunks=[(free_at - 1.0, 1)], sent_ms=i * GAP_MS, end_ms=free_at, seq=i)
        records.append(due(record, i * GAP_MS))
    return records


def test_an_overloaded_server_completes_at_its_own_pace_and_is_called_out():
    table = to_frame(fifo_records(120, service_ms=100.0))  # 10 req/s of the 20 offered
    derived, summary = derive_requests(table), summarize(table, "r", "synthetic")
    values = summary[summary["stat"] == "value"].set_index("metric")["value"]
    assert values["achieved_rate_rps"] == pytest.approx(20.0)  # the client sent on schedule
    assert values["completed_rate_rps"] == pytest.approx(120 / 12.0)  # the last ended at 12 s
    warning = overload_warning(derived)
    assert warning.startswith("the server did not keep up with the load offered")
    assert "requests completed of the 60 due" in warning and "response TTFT p50 rose" in warning


def test_a_server_that_keeps_up_raises_no_overload_warning():
    derived = derive_requests(to_frame(fifo_records(120, service_ms=30.0)))
    assert overload_warning(derived) is None


def test_the_servers_queued_gauge_stands_for_the_ttft_trend():
    keeps_up = derive_requests(to_frame(fifo_records(120, service_ms=30.0)))
    assert "the server's queue grew from 0.5 requests" in overload_warning(keeps_up, server_queue=(0.5, 6.0))
    assert overload_warning(keeps_up, server_queue=(1.0, 2.5)) is None  # a queue that wanders, not grows


def test_a_run_too_short_to_judge_raises_no_overload_warning():
    assert overload_warning(derive_requests(to_frame(fifo_records(30, service_ms=100.0)))) is None


def test_late_sends_that_kept_the_rate_do_not_claim_a_lighter_load():
    records = [due(build_record(chunks=[(i * 100 + lag + 20, 1)], sent_ms=i * 100 + lag, seq=i), i * 100)
               for i, lag in enumerate([0.0] * 5 + [40.0] * 5 + [0.0] * 10)]
    warning = lag_warning(derive_requests(to_frame(records)))
    assert "5 of 20 requests sent more than 10 ms late" in warning
    assert "lighter" not in warning and "the rate held" in warning


def test_late_sends_that_lowered_the_rate_say_the_load_was_lighter():
    records = [due(build_record(chunks=[(i * 100 + 300 + 20, 1)], sent_ms=i * 100 + 300 * (i >= 10), seq=i),
                   i * 100) for i in range(20)]
    assert "was lighter than offered" in lag_warning(derive_requests(to_frame(records)))


def test_the_run_line_sets_the_offered_rate_beside_the_asked_one_and_calls_out_the_overload(tmp_path):
    path = write_run(tmp_path, "r1", fifo_records(120, service_ms=100.0), SYNTHETIC)
    manifest = json.loads((path / "manifest.json").read_text())
    options = {"concurrency": 1, "request_rate": 22.0, "arrival_seed": 7}
    (path / "manifest.json").write_text(json.dumps(manifest | {"options": options}))
    shown = format_run_summary(Run.load(path))
    assert "open loop: rate asked 22/s (arrival seed 7), offered 20/s, sent 20/s, completed 10/s" in shown
    assert "WARNING: the server did not keep up with the load offered" in shown


def test_the_second_half_counts_ok_completions_against_arrivals_exactly():
    """FIFO at 10 req/s of 20 offered: due 0-5,950 ms, middle 2,975; requests 60-119 arrive in the
    second half, and those ending within it (at 100 ms steps, 3,000-5,900) are 29, one of the 30 failed."""
    records = fifo_records(120, service_ms=100.0)
    records[40] = replace(records[40], status="error", error_kind="disconnected", error_message="gone")
    assert completions_and_arrivals(derive_requests(to_frame(records))) == (29, 60)


def test_arrivals_are_counted_from_the_middle_of_the_span_on():
    """40 requests due in the first half of the span, 25 in the second: 25 arrived there."""
    dues = [25.0 * i for i in range(40)] + [1000.0 + 40.0 * i for i in range(25)]
    records = [due(build_record(chunks=[(ms + 5.0, 1)], sent_ms=ms, end_ms=ms + 6.0, seq=i), ms)
               for i, ms in enumerate(dues)]
    assert completions_and_arrivals(derive_requests(to_frame(records)))[1] == 25


def test_ttft_growth_is_the_thirds_median_and_p90_in_due_order():
    """Response TTFT of request i is 50 i + 99 ms: thirds of 40, medians at i = 19.5 and 99.5, p90 at 35.1."""
    assert ttft_growth(derive_requests(to_frame(fifo_records(120, service_ms=100.0)))) == pytest.approx(
        (1074.0, 1854.0, 5074.0))


def test_the_warning_names_both_signs_with_their_figures():
    warning = overload_warning(derive_requests(to_frame(fifo_records(120, service_ms=100.0))))
    assert "over the second half of the schedule 30 requests completed of the 60 due" in warning
    assert "response TTFT p50 rose from 1074.0 ms (first third of the requests) to 5074.0 ms (last third)" in warning


def test_a_queue_must_grow_past_twice_its_start_plus_one():
    keeps_up = derive_requests(to_frame(fifo_records(120, service_ms=30.0)))
    assert overload_warning(keeps_up, server_queue=(4.0, 8.5)) is None
    assert overload_warning(keeps_up, server_queue=(4.0, 9.5)) is not None


def timed_records(ttfts_ms: list[float], gap_ms: float = 1000.0, service_ms: float = 1.0) -> list:
    """Request i due at i * gap_ms and sent then, its first token ttfts_ms[i] later, done service_ms after it."""
    records = []
    for i, ttft in enumerate(ttfts_ms):
        first = i * gap_ms + ttft
        record = build_record(chunks=[(first, 1)], sent_ms=i * gap_ms, end_ms=first + service_ms, seq=i)
        records.append(due(record, i * gap_ms))
    return records


def thirds(first: list[float], last: float) -> list[float]:
    """Three thirds of 20 requests: `first`, then 100 ms each, then `last` each."""
    return [*first, *[100.0] * 20, *[last] * 20]


@pytest.mark.parametrize(("first", "last", "overloaded"), [
    ([100.0] * 17 + [150.0] * 3, 180.0, False),  # median 100, p90 150: under twice the median
    ([100.0] * 17 + [150.0] * 3, 201.0, True),
    ([100.0] * 17 + [300.0] * 3, 250.0, False),  # p90 300: twice the median is not enough
    ([100.0] * 17 + [300.0] * 3, 301.0, True),
])
def test_ttft_must_rise_past_twice_the_first_median_and_its_p90(first, last, overloaded):
    df = derive_requests(to_frame(timed_records(thirds(first, last))))
    assert ttft_growth(df) == pytest.approx((100.0, max(first[-1], 100.0), last))
    assert (overload_warning(df) is not None) is overloaded


def test_requests_without_a_response_ttft_stay_out_of_the_thirds():
    df = derive_requests(to_frame(timed_records(thirds([100.0] * 17 + [150.0] * 3, 180.0) + [100.0] * 6)))
    df.loc[df.index[-6:], "first_token_ns"] = None  # six requests whose first token was not measured
    assert ttft_growth(df) == pytest.approx((100.0, 150.0, 180.0))


@pytest.mark.parametrize(("late", "overloaded"), [(3, False), (4, True)])
def test_completions_short_by_exactly_a_fifth_are_not_an_overload(late, overloaded):
    """40 requests due 50 ms apart, 20 in the second half, each done 10 ms after its due time but the
    last (after the span) and `late` more: 16 of 20 completed in it is the limit, 15 is short."""
    records = timed_records([5.0] * 40, gap_ms=50.0, service_ms=5.0)
    for i in range(38, 38 - late, -1):
        records[i] = replace(records[i], end_ns=records[i].end_ns + 5_000_000_000)
    df = derive_requests(to_frame(records))
    assert completions_and_arrivals(df) == (19 - late, 20)
    assert (overload_warning(df) is not None) is overloaded
