"""Open-loop metrics on made-up records: lag, response vs service time, rates, windows, the lag
warning; SLO parsing, met or missed per request, attainment with its interval, goodput, and
their place in the summary and in compare."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from harness.analysis.compare import compare_loaded
from harness.analysis.run import Run
from harness.errors import SparkbenchError
from harness.metrics import derive_requests, summarize
from harness.metrics.load import lag_warning, load_values
from harness.metrics.slo import slo_met, slo_values
from harness.metrics.stats import wilson_interval
from harness.report.report import build_report
from harness.slo_targets import format_slo, parse_slo
from tests.unit.conftest import build_record, ns_at, to_frame
from tests.unit.test_report import SYNTHETIC, write_run


def due(record, ms: float, window: str | None = None):
    """The record with a due time `ms` after BASE_NS (and a window)."""
    return replace(record, scheduled_ns=ns_at(ms), window=window)


def open_loop_records(lags_ms: list[float], gap_ms: float = 100.0) -> list:
    """Request i due at i * gap_ms, sent lags_ms[i] later; first token 20 ms and [DONE] 40 ms after
    its send (5 tokens)."""
    out = []
    for i, lag in enumerate(lags_ms):
        sent = i * gap_ms + lag
        record = build_record(chunks=[(sent + 20 + 5 * k, 1) for k in range(5)], sent_ms=sent,
                              end_ms=sent + 40, seq=i)
        out.append(due(record, i * gap_ms))
    return out


def test_response_time_is_lag_plus_service_time():
    derived = derive_requests(to_frame(open_loop_records([0.0, 30.0, 250.0])))
    assert derived["send_lag_ms"].tolist() == pytest.approx([0.0, 30.0, 250.0])
    assert derived["ttft_ms"].tolist() == pytest.approx([20.0] * 3)
    assert derived["response_ttft_ms"].tolist() == pytest.approx([20.0, 50.0, 270.0])
    assert derived["response_e2e_ms"].tolist() == pytest.approx(derived["send_lag_ms"] + derived["e2e_ms"])


def test_a_closed_loop_has_no_response_times_and_no_schedule_rates_but_a_completion_rate():
    derived = derive_requests(to_frame([build_record(seq=i, sent_ms=10.0 * i) for i in range(3)]))
    assert derived["send_lag_ms"].isna().all() and derived["response_e2e_ms"].isna().all()
    values = load_values(derived)
    assert all(math.isnan(v) for name, v in values.items() if name != "completed_rate_rps")
    assert values["completed_rate_rps"] == pytest.approx(3 / 0.101)  # first sent at 0 ms, every one ended at 101 ms
    assert lag_warning(derived) is None


def test_offered_and_achieved_rates_come_from_due_and_send_times():
    derived = derive_requests(to_frame(open_loop_records([0.0, 0.0, 0.0, 0.0, 100.0])))
    values = load_values(derived)
    assert values["offered_rate_rps"] == pytest.approx(4 / 0.4)  # five due 100 ms apart
    assert values["achieved_rate_rps"] == pytest.approx(4 / 0.5)  # the last sent 100 ms late
    assert values["requests_late"] == 1


def test_the_lag_warning_gives_the_distribution_only_when_the_client_fell_behind():
    on_time = derive_requests(to_frame(open_loop_records([0.1] * 19 + [50.0])))  # 1 of 20 late: 5%
    assert lag_warning(on_time) is None
    behind = derive_requests(to_frame(open_loop_records([0.1] * 17 + [40.0, 80.0, 120.0])))
    warning = lag_warning(behind)
    assert "3 of 20 requests sent more than 10 ms late" in warning
    assert "p50 0.1 ms" in warning and "max 120.0 ms" in warning


def test_the_summary_leaves_out_the_warmup_and_cooldown_windows():
    records = open_loop_records([0.0] * 6)
    records = [replace(r, window=w) for r, w in zip(records, ["warmup", "measured", "measured", "measured",
                                                               "measured", "cooldown"])]
    summary = summarize(to_frame(records), "r", "synthetic").set_index(["metric", "stat"])["value"]
    assert summary[("requests", "value")] == 4
    assert summary[("offered_rate_rps", "value")] == pytest.approx(3 / 0.3)
    assert summary[("response_e2e_ms", "n")] == 4


@pytest.mark.parametrize("text, targets", [
    ("ttft=500ms,tpot=50ms,e2e=30s", {"ttft": 500.0, "tpot": 50.0, "e2e": 30_000.0}),
    ("e2e:1.5m", {"e2e": 90_000.0}),
    ("TPOT=20", {"tpot": 20.0}),
    (" ttft = 0.25s , ", {"ttft": 250.0}),
])
def test_slo_targets_parse_in_every_form(text, targets):
    assert parse_slo(text) == targets
    assert parse_slo(format_slo(targets)) == targets


@pytest.mark.parametrize("text, message", [
    ("ttft=fast", "not FIGURE=LIMIT"), ("itl2=5ms", "unknown figure"), ("ttft=1,ttft=2", "given twice"),
    ("ttft=0ms", "more than 0"), ("", "no target"), ("ttft=5h", "not FIGURE=LIMIT"),
])
def test_bad_slo_targets_are_one_line(text, message):
    with pytest.raises(SparkbenchError, match=message) as caught:
        parse_slo(text)
    assert "\n" not in str(caught.value)


def judged_table():
    """Four requests due 100 ms apart: on time; 300 ms late (service fine, response not); failed;
    one token only (no decode)."""
    records = open_loop_records([0.0, 300.0, 0.0, 0.0])
    records[2] = replace(records[2], status="error", error_kind="timeout", error_message="made up")
    records[3] = due(build_record(chunks=[(320.0, 1)], sent_ms=300.0, end_ms=330.0, seq=3), 300.0)
    return derive_requests(to_frame(records))


def test_a_request_meets_the_slo_only_when_it_succeeded_within_every_limit():
    derived = judged_table()
    assert slo_met(derived, {"ttft": 100.0}).tolist() == [True, False, False, True]  # judged from the due time
    assert slo_met(derived, {"tpot": 1.0}).tolist() == [False, False, False, True]  # one token: no decode
    assert slo_met(derived, {"tpot": 10.0, "e2e": 1000.0}).tolist() == [True, True, False, True]
    closed = derived.assign(scheduled_ns=None)
    assert slo_met(closed, {"ttft": 100.0}).tolist() == [True, True, False, True]  # service time without a due time


def test_a_figure_that_was_not_measured_misses():
    derived = judged_table().assign(ttft_ms=np.nan, response_ttft_ms=np.nan)
    assert not slo_met(derived, {"ttft": 1e9}).any()


def test_attainment_and_goodput():
    derived = judged_table()
    values = slo_values(derived, {"ttft": 100.0})
    assert values["slo_attainment"]["mean"] == 0.5 and values["slo_attainment"]["n"] == 4
    assert (values["slo_attainment"]["ci95_low"], values["slo_attainment"]["ci95_high"]) == wilson_interval(2, 4)
    span_s = (440.0 - 0.0) / 1000  # first ok send to last ok [DONE] (the late request: 400 + 40)
    assert values["goodput_rps"]["value"] == pytest.approx(2 / span_s)
    assert values["goodput_tok_s"]["value"] == pytest.approx((5 + 1) / span_s)
    assert values["slo_attainment_ttft"]["value"] == 0.5
    assert math.isnan(values["slo_attainment_e2e"]["value"])  # no e2e target given


def test_the_run_summary_and_compare_carry_the_slo_metrics(tmp_path):
    runs = []
    for name, lags in (("base", [0.0] * 8), ("cand", [0.0] * 4 + [300.0] * 4)):
        path = write_run(tmp_path, f"20260101T00000{len(runs)}Z-{name}", open_loop_records(lags), SYNTHETIC)
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["options"] = {"request_rate": 10.0, "slo": "ttft=100ms"}
        (path / "manifest.json").write_text(json.dumps(manifest))
        runs.append(Run.load(path))
    summary = runs[1].summary.set_index(["metric", "stat"])["value"]
    assert summary[("slo_attainment", "mean")] == 0.5
    table = compare_loaded(runs).set_index(["run_id", "metric", "stat"])
    row = table.loc[(runs[1].run_id, "slo_attainment", "mean")]
    assert row["value"] == 0.5 and row["baseline_value"] == 1.0 and row["change"] == pytest.approx(-0.5)
    assert row["verdict"] == "worse"
    assert table.loc[(runs[1].run_id, "response_e2e_ms", "p95"), "value"] > 300


def test_the_report_shows_open_loop_and_slo_figures_and_marks_the_windows(tmp_path):
    records = open_loop_records([0.0] * 5 + [300.0] * 5)
    records = [replace(r, window="warmup" if i < 2 else "cooldown" if i > 8 else "measured")
               for i, r in enumerate(records)]
    path = write_run(tmp_path / "results", "20260101T000000Z-open", records, SYNTHETIC)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["options"] = {"request_rate": 10.0, "slo": "ttft=100ms"}
    (path / "manifest.json").write_text(json.dumps(manifest))
    html_path, md_path = build_report([path], tmp_path / "report")
    page = html_path.read_text(encoding="utf-8")
    assert "SLO attainment" in page and "response E2E p95 ms" in page and "goodput req/s" in page
    assert "the client fell behind its arrival schedule" in page  # 4 of the 7 measured requests were late
    assert "open_loop_timeline.png" in md_path.read_text(encoding="utf-8")
    timeline = next((tmp_path / "report").rglob("open_loop_timeline.svg")).read_text(encoding="utf-8")
    assert "warmup window (left out)" in timeline and "cooldown window (left out)" in timeline


def test_goodput_parts_share_the_span_among_the_requests():
    """Four requests over 8 s, three met: each holds 8 / 4 = 2 s of the span, so the sums give 3 / 8
    requests a second; a run without an ok request has no span to share."""
    import pandas as pd

    from harness.metrics.slo import goodput_parts

    judged = pd.DataFrame({"status": ["ok"] * 4, "sent_ns": [0, 2 * 10**9, 4 * 10**9, 6 * 10**9],
                           "end_ns": [2 * 10**9, 4 * 10**9, 6 * 10**9, 8 * 10**9],
                           "slo_met": [True, False, True, True]})
    met, share = goodput_parts(judged)
    assert met.tolist() == [1.0, 0.0, 1.0, 1.0] and share.tolist() == [2.0] * 4
    met, share = goodput_parts(judged.assign(status="error"))
    assert share.tolist() == [0.0] * 4


def test_tpot_is_judged_from_two_tokens_and_a_table_without_status_is_all_ok():
    import pandas as pd

    from harness.metrics.slo import figure_met

    derived = pd.DataFrame({"tpot_ms": [80.0, 80.0, np.nan], "completion_tokens": [2.0, 3.0, 1.0]})
    assert figure_met(derived, "tpot", 50.0).tolist() == [False, False, True]  # one token: no decode
    assert figure_met(derived, "tpot", 100.0).tolist() == [True, True, True]


def test_rates_count_gaps_between_stamps_and_need_time_between_them():
    """Two due times 0.5 s apart are a rate of 2/s; a completion rate runs from the first send (the
    clock's zero is anywhere: stamps of a few seconds count as those of days); no time, no rate."""
    pair = derive_requests(to_frame(open_loop_records([0.0, 0.0], gap_ms=500.0)))
    assert load_values(pair)["offered_rate_rps"] == pytest.approx(2.0)
    near_zero = pair.assign(sent_ns=[1e9, 2e9], end_ns=[3e9, 5e9])
    assert load_values(near_zero)["completed_rate_rps"] == pytest.approx(2 / 4.0)
    failed = near_zero.assign(status=["error", "ok"])  # a failed request is not a completion
    assert load_values(failed)["completed_rate_rps"] == pytest.approx(1 / 3.0)
    instant = near_zero.assign(end_ns=[1e9, 1e9])
    assert math.isnan(load_values(instant)["completed_rate_rps"])


def test_a_table_written_before_due_times_existed_has_no_send_lag():
    frame = to_frame(open_loop_records([0.0, 30.0])).drop(columns="scheduled_ns")
    derived = derive_requests(frame)
    assert derived["send_lag_ms"].isna().all() and math.isnan(load_values(derived)["offered_rate_rps"])
