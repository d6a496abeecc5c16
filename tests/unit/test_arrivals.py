"""Arrival schedules: drawn gaps follow the asked gamma distribution; replayed files are read as given."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness.config import validated
from harness.errors import SparkbenchError
from harness.run.arrivals import (
    drawn_offsets,
    read_schedule,
    schedule_of,
    windows,
    write_schedule,
)
from harness.run.load_options import LoadOptions

KS_ALPHA = 0.01
GAPS = 4000


def ks_p_value(gaps: np.ndarray, rate: float, burstiness: float) -> float:
    """Kolmogorov-Smirnov test of the gaps against Gamma(shape burstiness, mean 1 / rate)."""
    return stats.kstest(gaps, stats.gamma(a=burstiness, scale=1 / (rate * burstiness)).cdf).pvalue


@pytest.mark.parametrize("rate", [0.5, 10.0, 200.0])
@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_drawn_gaps_follow_the_asked_gamma_distribution(rate, burstiness):
    offsets = drawn_offsets(rate, burstiness, seed=7, count=GAPS + 1)
    gaps = np.diff(offsets)
    assert offsets[0] == 0.0 and len(gaps) == GAPS
    assert ks_p_value(gaps, rate, burstiness) > KS_ALPHA
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.1)


@pytest.mark.parametrize("asked, tested", [(1.0, 0.5), (0.5, 1.0), (1.0, 2.0)])
def test_the_ks_check_tells_another_burstiness_apart(asked, tested):
    gaps = np.diff(drawn_offsets(10.0, asked, seed=7, count=GAPS + 1))
    assert ks_p_value(gaps, 10.0, tested) < KS_ALPHA


def test_a_seed_fixes_the_schedule_and_another_changes_it():
    first = drawn_offsets(5.0, 1.0, seed=3, count=50)
    assert np.array_equal(first, drawn_offsets(5.0, 1.0, seed=3, count=50))
    assert not np.array_equal(first, drawn_offsets(5.0, 1.0, seed=4, count=50))


def test_a_duration_keeps_every_arrival_due_before_it_and_each_window_offers_the_rate():
    offsets = drawn_offsets(50.0, 1.0, seed=1, duration_s=100.0, cuts=(20.0, 90.0))
    assert offsets[0] == 0.0 and offsets[-1] < 100.0 and np.all(np.diff(offsets) > 0)
    for start, end in ((0.0, 20.0), (20.0, 90.0), (90.0, 100.0)):  # warm-up, measured, cool-down
        stretch = offsets[(offsets >= start) & (offsets < end)]
        assert len(stretch) == 50 * (end - start)
        assert (len(stretch) - 1) / (stretch[-1] - stretch[0]) == pytest.approx(50.0, rel=1e-9)


@pytest.mark.parametrize("count", [10, 200, 1000])
def test_a_drawn_schedule_offers_the_rate_asked(count):
    # A plain draw of 200 at 29.6 req/s (seed 0) offered 26.2 req/s: 11% less than asked.
    offsets = drawn_offsets(29.6, 1.0, seed=0, count=count)
    assert (count - 1) / (offsets[-1] - offsets[0]) == pytest.approx(29.6, rel=1e-9)


def test_a_timed_run_offers_the_rate_asked_over_its_measured_requests():
    options = LoadOptions(request_rate=11.35, arrival_seed=5, duration_s=90.0, warmup_window_s=18.0,
                          cooldown_window_s=2.0)
    offsets = schedule_of(options, None)
    measured = offsets[np.array(windows(offsets, options)) == "measured"]
    assert (len(measured) - 1) / (measured[-1] - measured[0]) == pytest.approx(11.35, rel=1e-9)


def test_a_replayed_schedule_is_read_as_given(tmp_path):
    csv_file = tmp_path / "trace.csv"
    csv_file.write_text("ts,offset_s\na,0\nb,0.25\nc,0.25\nd,3.5\n", encoding="utf-8")
    jsonl = tmp_path / "trace.jsonl"
    jsonl.write_text('{"offset_s": 0.0}\n\n1.5\n{"offset_s": 2}\n', encoding="utf-8")
    bare = tmp_path / "bare.csv"
    bare.write_text("0\n0.1\n0.2\n", encoding="utf-8")
    assert read_schedule(csv_file).tolist() == [0.0, 0.25, 0.25, 3.5]
    assert read_schedule(jsonl).tolist() == [0.0, 1.5, 2.0]
    assert read_schedule(bare).tolist() == [0.0, 0.1, 0.2]


@pytest.mark.parametrize("text, message", [
    ("0\n2\n1\n", "line 3: offset 1 comes before"),
    ("0\n-1\n", "line 2: offset -1.0 is not a finite number"),
    ("0\nsoon\n", "line 2: 'soon' is not a number"),
    ("a,b\n1,2\n", "needs one named offset_s"),
    ("", "no offsets"),
])
def test_a_bad_schedule_is_one_line_naming_the_line(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SparkbenchError, match=message) as caught:
        read_schedule(path)
    assert "\n" not in str(caught.value)


def test_the_schedule_is_stored_and_reads_back_the_same(tmp_path):
    offsets = drawn_offsets(20.0, 0.5, seed=2, count=100)
    stored = write_schedule(tmp_path, offsets)
    assert stored.name == "schedule.csv"
    assert np.array_equal(read_schedule(stored), offsets)  # repr keeps every bit of each float


def test_a_replayed_file_is_cut_to_the_duration(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("0\n1\n2\n3\n", encoding="utf-8")
    options = LoadOptions(schedule=path, duration_s=2.5)
    assert schedule_of(options, None).tolist() == [0.0, 1.0, 2.0]


def test_lengths_of_time_and_slo_targets_are_read_once():
    options = validated(LoadOptions, {"request_rate": 2.0, "duration_s": "10m", "warmup_window_s": "30s",
                                      "cooldown_window_s": 5, "slo": "ttft=0.5s, e2e=30s"}, "load")
    assert (options.duration_s, options.warmup_window_s, options.cooldown_window_s) == (600.0, 30.0, 5.0)
    assert options.slo == "ttft=500ms,e2e=30000ms"
    assert options.slo_targets == {"ttft": 500.0, "e2e": 30_000.0}


def test_windows_mark_warmup_and_cooldown_by_due_time():
    options = LoadOptions(request_rate=1.0, duration_s=10.0, warmup_window_s=2.0, cooldown_window_s=3.0)
    marks = windows(np.array([0.0, 1.9, 2.0, 6.9, 7.0, 9.9]), options)
    assert marks == ["warmup", "warmup", "measured", "measured", "cooldown", "cooldown"]
    assert windows(np.array([0.0, 5.0]), LoadOptions(request_rate=1.0)) == ["measured", "measured"]


@pytest.mark.parametrize("data, message", [
    ({"request_rate": 1.0, "schedule": "x.csv"}, "not both"),
    ({"duration_s": 10.0}, "need --request-rate or --schedule"),
    ({"request_rate": 1.0, "duration_s": 5.0, "warmup_window_s": 3.0, "cooldown_window_s": 2.0}, "nothing of --duration"),
    ({"request_rate": 1.0, "duration_s": "soon"}, "not a length of time"),
    ({"request_rate": 1.0, "slo": "ttft=fast"}, "not FIGURE=LIMIT"),
    ({"request_rate": 0.0}, "greater than 0"),
])
def test_load_options_refuse_what_cannot_run(data, message):
    with pytest.raises(SparkbenchError, match=message):
        validated(LoadOptions, data, "load")
