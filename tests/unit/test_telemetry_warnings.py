"""Warnings from the sampled series, the in-flight check and the timeline figure, on made-up runs;
the throttle warning is raised through the real device sampler reading an NVML test double."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from harness.analysis.run import Run
from harness.analysis.tables import run_warnings
from harness.analysis.telemetry import (
    bracketing,
    client_output_tokens,
    in_flight_check,
    server_cache_hit_rate,
    telemetry_warnings,
)
from harness.metrics.timeline import counter_increase, counter_rate, in_flight, output_rate, throttle_names
from harness.records.timeseries import DEVICE, DEVICE_COLUMNS, SeriesWriter
from harness.report.timeline import plot_run_timeline
from harness.telemetry.device import DeviceSampler, nvml_gpus
from tests.fakes.nvml import FakeNvml, busy_gpu
from tests.unit.conftest import BASE_NS, build_record, ns_at

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(path, records, concurrency=1, scrapes=(), window_ms=(0.0, 1000.0), engine="vllm"):
    """A run folder: manifest with the telemetry window (warm-up from -500 ms), requests, and the
    server scrapes given as (ms, role, value) rows."""
    path.mkdir()
    manifest = {"run_id": path.name, "status": "complete", "workload": {"name": "synthetic"}, "engine": engine,
                "api": "openai", "options": {"concurrency": concurrency},
                "telemetry": {"interval_s": 0.1, "window": {"warmup_start_ns": ns_at(-500.0),
                                                            "measured_start_ns": ns_at(window_ms[0]),
                                                            "measured_end_ns": ns_at(window_ms[1])},
                              "server_metrics": {"status": "measured"}, "device": {"status": "measured"}}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "requests.jsonl").write_text("".join(json.dumps(asdict(r)) + "\n" for r in records))
    metric = {"running": "vllm:num_requests_running", "queued": "vllm:num_requests_waiting",
              "preemptions": "vllm:num_preemptions_total", "generation_tokens": "vllm:generation_tokens_total",
              "prefix_cache_hits": "vllm:prefix_cache_hits_total",
              "prefix_cache_queries": "vllm:prefix_cache_queries_total"}
    rows = [{"t_ns": ns_at(ms), "role": role, "metric": metric[role], "labels": "{}", "value": value}
            for ms, role, value in scrapes]
    (path / "server_metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def one_stream(seq=0, sent=0.0, tokens=10, step=50.0):
    """A request sent at `sent` ms with `tokens` one-token chunks `step` ms apart."""
    return build_record(chunks=[(sent + 10 + step * k, 1) for k in range(tokens)], sent_ms=sent, seq=seq,
                        engine="vllm")


def test_in_flight_counts_requests_between_send_and_end():
    sent, end = np.array([0, 10, 20]), np.array([15, 30, 25])
    assert in_flight(sent, end, np.array([-1, 0, 12, 15, 22, 29, 30])).tolist() == [0, 1, 2, 1, 2, 1, 0]


def test_output_rate_bins_each_chunks_new_tokens():
    edges = np.array([0, 1_000_000_000, 2_000_000_000])
    rate = output_rate([[100, 1_500_000_000], [200]], [[2, 5], [4]], edges)
    assert rate.tolist() == [6.0, 3.0]


def test_counter_increase_and_rate_survive_a_restart():
    assert counter_increase(np.array([10.0, 15.0, 3.0, 4.0])) == 5 + 3 + 1
    assert np.isnan(counter_increase(np.array([1.0])))
    mid, rate = counter_rate(np.array([0, 2_000_000_000]), np.array([10.0, 30.0]))
    assert mid.tolist() == [1_000_000_000] and rate.tolist() == [10.0]


def test_throttle_reasons_other_than_idle_are_named():
    assert throttle_names(0x1) == []
    assert throttle_names(0x1 | 0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]
    assert throttle_names(0x2000) == ["0x2000"]


def test_a_queue_during_a_batch_one_run_warns(tmp_path):
    scrapes = [(-1.0, "queued", 0.0), (500.0, "queued", 1.0), (1001.0, "queued", 0.0)]
    run = Run.load(write_run(tmp_path / "r", [one_stream()], concurrency=1, scrapes=scrapes))
    assert any("queue held up to 1 requests during this batch-1 run" in w for w in telemetry_warnings(run))
    assert any("vllm:num_requests_waiting" in w for w in run_warnings(run))


def test_a_queue_at_concurrency_four_or_outside_the_window_is_no_warning(tmp_path):
    scrapes = [(-300.0, "queued", 2.0), (-1.0, "queued", 0.0), (500.0, "queued", 0.0), (1001.0, "queued", 0.0)]
    assert telemetry_warnings(Run.load(write_run(tmp_path / "a", [one_stream()], scrapes=scrapes))) == []
    busy = [(-1.0, "queued", 0.0), (500.0, "queued", 3.0)]
    assert telemetry_warnings(Run.load(write_run(tmp_path / "b", [one_stream()], concurrency=4, scrapes=busy))) == []


def test_an_open_loop_whose_server_queue_grows_is_overloaded_not_shared(tmp_path):
    scrapes = [(ms, "queued", value) for ms, value in zip(range(0, 1001, 125), [0, 0, 1, 2, 3, 5, 6, 8, 9])]
    path = write_run(tmp_path / "r", [one_stream()], scrapes=scrapes)
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps(manifest | {"options": {"concurrency": 1, "request_rate": 8.0}}))
    warnings = telemetry_warnings(Run.load(path))
    assert len(warnings) == 1 and "the server's queue grew from 0.3 requests waiting" in warnings[0]
    assert "did not keep up with the load offered" in warnings[0]


def test_preemptions_during_the_measured_requests_warn(tmp_path):
    scrapes = [(-400.0, "preemptions", 1.0), (-1.0, "preemptions", 2.0), (500.0, "preemptions", 2.0),
               (1001.0, "preemptions", 5.0)]
    warnings = telemetry_warnings(Run.load(write_run(tmp_path / "r", [one_stream()], scrapes=scrapes)))
    assert warnings == ["the server preempted requests during the run: 3 preempted (vllm:num_preemptions_total); "
                        "KV cache ran short"]


def test_no_preemption_scraped_in_the_window_is_no_warning(tmp_path):
    scrapes = [(-1.0, "running", 1.0), (1001.0, "running", 1.0)]  # the engine has the series, no scrape of it
    assert telemetry_warnings(Run.load(write_run(tmp_path / "r", [one_stream()], scrapes=scrapes))) == []


def test_the_servers_cache_hit_rate_needs_both_counters_across_the_window(tmp_path):
    hits = [(-1.0, "prefix_cache_hits", 10.0), (1001.0, "prefix_cache_hits", 40.0)]
    queries = [(-1.0, "prefix_cache_queries", 20.0), (1001.0, "prefix_cache_queries", 80.0)]
    both = Run.load(write_run(tmp_path / "both", [one_stream()], scrapes=hits + queries))
    assert server_cache_hit_rate(both) == pytest.approx(30 / 60)
    for one in (hits, queries):
        alone = Run.load(write_run(tmp_path / one[0][1], [one_stream()], scrapes=one))
        assert np.isnan(server_cache_hit_rate(alone))


CLOCK_ZERO_MS = -BASE_NS / 1e6  # the client clock's origin, in this module's milliseconds


def throughput_warnings(path, server_tokens: float, scrapes_at=(-1.0, 3001.0), origin: float = 0.0) -> list[str]:
    """Two requests of 10 tokens in a 3 s window from `origin` (6.7 tok/s), the server's token counter
    up `server_tokens`."""
    records = [one_stream(0, origin), one_stream(1, origin + 100.0)]
    scrapes = [(origin + at, "generation_tokens", 100.0 + server_tokens * k) for k, at in enumerate(scrapes_at)]
    window = (origin, origin + 3000.0)
    return telemetry_warnings(Run.load(write_run(path, records, scrapes=scrapes, window_ms=window)))


@pytest.mark.parametrize("server_tokens", [20.0, 20.8, 19.2])
def test_server_and_client_throughput_within_the_tolerance_are_no_warning(tmp_path, server_tokens):
    assert throughput_warnings(tmp_path / "r", server_tokens) == []


@pytest.mark.parametrize("origin", [0.0, CLOCK_ZERO_MS + 500.0])  # the window 0.5 s after the clock's zero
def test_server_throughput_beyond_the_tolerance_is_said_with_both_rates(tmp_path, origin):
    assert throughput_warnings(tmp_path / "r", 26.0, origin=origin) == [
        "the server's own output throughput (8.7 tok/s, vllm:generation_tokens_total) differs from the client's "
        "(6.7 tok/s) by +30.0%, beyond the 5% tolerance: another client, or tokens the client did not see"]


def test_one_scrape_of_the_token_counter_compares_nothing(tmp_path):
    assert throughput_warnings(tmp_path / "r", 26.0, scrapes_at=(3001.0,)) == []


def sample_gpu(run_dir, nvml, at_ms):
    """The real device sampler reading the NVML double once at each of `at_ms` (client clock)."""
    gpus, _ = nvml_gpus(nvml)
    writer = SeriesWriter(run_dir, DEVICE, DEVICE_COLUMNS)
    times = iter(ns_at(ms) for ms in at_ms)
    sampler = DeviceSampler(gpus, writer, 1.0, clock=lambda: next(times))
    for ms in at_ms:
        nvml.gpus[0]["throttle_reasons"] = 0x4 if 200 <= ms <= 400 else 0x1 if ms < 0 else 0
        sampler.sample()
    writer.close()


def test_an_nvml_throttle_reason_inside_the_window_raises_the_warning(tmp_path):
    run_dir = write_run(tmp_path / "r", [one_stream()])
    sample_gpu(run_dir, FakeNvml([busy_gpu()]), [-300.0, 100.0, 300.0, 500.0])
    warnings = telemetry_warnings(Run.load(run_dir))
    assert warnings == ["the GPU throttled during the measured requests (GPU 0: software power cap in 1 of 3 samples)"]


def test_idle_clocks_and_throttling_outside_the_window_are_no_warning(tmp_path):
    run_dir = write_run(tmp_path / "r", [one_stream()], window_ms=(500.0, 1000.0))
    sample_gpu(run_dir, FakeNvml([busy_gpu()]), [-300.0, 300.0, 600.0])  # idle in warm-up, capped before
    assert telemetry_warnings(Run.load(run_dir)) == []


def test_the_in_flight_check_sets_client_and_server_side_by_side(tmp_path):
    records = [one_stream(0, 0.0), one_stream(1, 0.0), one_stream(2, 300.0)]  # each lasts 461 ms
    scrapes = [(-1.0, "running", 0.0), (200.0, "running", 2.0), (400.0, "running", 3.0), (700.0, "running", 1.0),
               (1001.0, "running", 0.0)]
    check = in_flight_check(Run.load(write_run(tmp_path / "r", records, concurrency=4, scrapes=scrapes)))
    assert check["client_in_flight"].tolist() == [2, 3, 1]
    assert check["server_running"].tolist() == [2.0, 3.0, 1.0] and check["server_queued"].tolist() == [0.0] * 3


def test_the_timeline_is_drawn_with_telemetry_and_says_what_is_missing_without(tmp_path):
    scrapes = [(-1.0, "running", 0.0), (500.0, "running", 1.0), (-1.0, "generation_tokens", 0.0),
               (1001.0, "generation_tokens", 10.0)]
    run_dir = write_run(tmp_path / "r", [one_stream()], scrapes=scrapes)
    sample_gpu(run_dir, FakeNvml([busy_gpu()]), [-300.0, 300.0])
    png, svg = plot_run_timeline(Run.load(run_dir), tmp_path / "plots")
    assert png.read_bytes()[:8] == PNG_MAGIC and "measured" in svg.read_text()
    bare = write_run(tmp_path / "bare", [one_stream()])
    manifest = json.loads((bare / "manifest.json").read_text())
    manifest["telemetry"]["device"] = {"status": "not measured", "reason": "NVML lists no GPU"}
    (bare / "manifest.json").write_text(json.dumps(manifest))
    _, svg = plot_run_timeline(Run.load(bare), tmp_path / "plots", "bare")
    assert "NVML lists no GPU" in svg.read_text() and "not exported by the server" in svg.read_text()


def test_the_in_flight_check_times_each_scrape_from_the_windows_start(tmp_path):
    scrapes = [(200.0, "running", 1.0), (700.0, "running", 1.0)]
    check = in_flight_check(Run.load(write_run(tmp_path / "r", [one_stream()], scrapes=scrapes,
                                               window_ms=(100.0, 1000.0))))
    assert check["t_s"].tolist() == pytest.approx([0.1, 0.6])


def test_the_in_flight_check_times_scrapes_from_a_window_near_the_clocks_zero(tmp_path):
    """A clock that started 0.1 s before the window (a host just booted): 0.2 s is 0.1 s in."""
    zero = CLOCK_ZERO_MS
    scrapes = [(zero + 200.0, "running", 1.0), (zero + 700.0, "running", 1.0)]
    check = in_flight_check(Run.load(write_run(tmp_path / "r", [one_stream()], scrapes=scrapes,
                                               window_ms=(zero + 100.0, zero + 1000.0))))
    assert check["t_s"].tolist() == pytest.approx([0.1, 0.6])


def test_throttling_counts_from_the_windows_first_to_its_last_instant(tmp_path):
    """Window 0-300 ms; capped at 300 (its last instant) and at 350 (after it)."""
    run_dir = write_run(tmp_path / "r", [one_stream()], window_ms=(0.0, 300.0))
    sample_gpu(run_dir, FakeNvml([busy_gpu()]), [0.0, 100.0, 300.0, 350.0, 500.0])
    assert telemetry_warnings(Run.load(run_dir)) == [
        "the GPU throttled during the measured requests (GPU 0: software power cap in 1 of 3 samples)"]


def test_scrapes_are_bracketed_by_the_last_before_and_the_first_after_the_window():
    frame = pd.DataFrame({"t_ns": [0, 10, 20, 30, 40, 30], "value": range(6)})
    assert bracketing(frame, 15, 25)["t_ns"].tolist() == [10, 20, 30, 30]
    assert bracketing(frame, 10, 30)["t_ns"].tolist() == [10, 20, 30, 30]
    assert bracketing(frame, -5, 45)["t_ns"].tolist() == [0, 10, 20, 30, 40, 30]


def test_the_clients_output_tokens_are_the_final_count_else_the_last_running_one():
    requests = pd.DataFrame({"completion_tokens": [None, 5, None],
                             "chunk_tokens": [[1, 2, 7], [1, 2, 3], []]})
    assert client_output_tokens(requests) == 7 + 5 + 0


def test_a_run_without_a_measured_window_has_no_in_flight_check(tmp_path):
    run_dir = write_run(tmp_path / "r", [one_stream()], scrapes=[(200.0, "running", 1.0)])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["telemetry"]["window"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert in_flight_check(Run.load(run_dir)).empty
