"""The samplers: `/metrics` scraped through prometheus_client into tidy rows, NVML read through a
test double, and the sampling window marked on the client's clock."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.analysis.tables import gpu_note
from harness.engines.registry import engine_named
from harness.engines.series import GENERATION_TOKENS, QUEUED, RUNNING, Series
from harness.records.entries import TelemetryEntry
from harness.records.timeseries import DEVICE, DEVICE_COLUMNS, SERVER_COLUMNS, SERVER_METRICS, SeriesWriter, load_series
from harness.telemetry.device import UNIFIED_MEMORY_NOTE, DeviceSampler, nvml_gpus
from harness.telemetry.sampling import telemetry_sampling
from harness.telemetry.server import SCRAPE_MAX_BYTES, ServerScraper, scrapes_to_skip
from tests.fakes.nvml import NOT_SUPPORTED, FakeNvml, busy_gpu

SGLANG_TEXT = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="tiny",tp_rank="0"} 3.0
sglang:num_queue_reqs{engine_type="unified",model_name="tiny",tp_rank="0"} 1.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="tiny"} 1234.0
sglang:generation_tokens_created{model_name="tiny"} 1.7e9
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="tiny"} 4.0
"""
SERIES = (Series(RUNNING, "sglang:num_running_reqs"), Series(QUEUED, "sglang:num_queue_reqs"),
          Series(GENERATION_TOKENS, "sglang:generation_tokens_total", counter=True),
          Series("kv_usage", "sglang:token_usage"))


class Clock:
    """A clock that advances 1 ms per reading."""

    def __init__(self) -> None:
        self.now = 10**12

    def __call__(self) -> int:
        self.now += 1_000_000
        return self.now


def metrics_server(text: str = SGLANG_TEXT, status: int = 200) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, text=text))


def test_a_scrape_keeps_the_named_series_as_tidy_rows(tmp_path):
    writer = SeriesWriter(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    scraper = ServerScraper("http://s", SERIES, writer, 1.0, clock=Clock(), transport=metrics_server())
    scraper.scrape()
    writer.close()
    rows = load_series(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    assert sorted(rows["role"]) == [GENERATION_TOKENS, QUEUED, RUNNING]
    running = rows[rows["role"] == RUNNING].iloc[0]
    assert running["metric"] == "sglang:num_running_reqs" and running["value"] == 3.0
    assert json.loads(running["labels"]) == {"engine_type": "unified", "model_name": "tiny", "tp_rank": "0"}
    assert rows[rows["role"] == GENERATION_TOKENS]["value"].tolist() == [1234.0]  # never the _created stamp
    # Stamped halfway between sending the scrape and its answer, on the given clock.
    assert rows["t_ns"].nunique() == 1 and rows["t_ns"].iloc[0] == 10**12 + 1_500_000
    assert scraper.summary() == {"scrapes": 1, "failed_scrapes": 0, "skipped_scrapes": 0, "first_error": None,
                                 "not_exported": ["sglang:token_usage"]}


def test_a_server_without_metrics_is_said_once_and_not_scraped_again(tmp_path):
    writer = SeriesWriter(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    calls = []
    transport = httpx.MockTransport(lambda request: calls.append(1) or httpx.Response(404))
    scraper = ServerScraper("http://s", SERIES, writer, 0.001, transport=transport)
    scraper.start()
    scraper.stop()
    writer.close()
    assert "404" in scraper.not_exported and len(calls) == 1
    assert load_series(tmp_path, SERVER_METRICS, SERVER_COLUMNS).empty


def test_failed_scrapes_are_counted_not_raised(tmp_path):
    def refuse(request):
        raise httpx.ConnectError("refused")
    writer = SeriesWriter(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    scraper = ServerScraper("http://s", SERIES, writer, 1.0, transport=httpx.MockTransport(refuse))
    scraper.scrape()
    scraper.scrape()
    assert scraper.summary()["failed_scrapes"] == 2 and "refused" in scraper.summary()["first_error"]


def test_a_metrics_answer_past_its_size_limit_is_a_failed_scrape_not_read_further(tmp_path):
    huge = SGLANG_TEXT + "# padding\n" * (SCRAPE_MAX_BYTES // 10)
    writer = SeriesWriter(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    scraper = ServerScraper("http://s", SERIES, writer, 1.0, transport=metrics_server(huge))
    scraper.scrape()
    writer.close()
    assert scraper.summary()["failed_scrapes"] == 1 and "more than 4 MiB" in scraper.summary()["first_error"]
    assert load_series(tmp_path, SERVER_METRICS, SERVER_COLUMNS).empty


@pytest.mark.parametrize(("cost_s", "took_s", "skipped"), [
    (0.001, 0.002, 0),  # a cheap, quick scrape: the next one is due at the next interval
    (0.2, 0.3, 3),  # 0.2 s of CPU: scraping may take 5%, so the next is 4 s after this one
    (0.0, 2.5, 2),  # a scrape that waited 2.5 s on the server: the two due meanwhile are skipped
])
def test_scrapes_that_would_overrun_their_share_are_skipped(cost_s, took_s, skipped):
    assert scrapes_to_skip(cost_s, took_s, interval_s=1.0) == skipped


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp"])
def test_each_engine_names_running_queued_and_its_output_counter(engine):
    roles = {s.role: s for s in engine_named(engine).server_series}
    assert {RUNNING, QUEUED, GENERATION_TOKENS} <= set(roles)
    assert roles[GENERATION_TOKENS].counter and roles[GENERATION_TOKENS].metric.endswith("_total")
    assert all(s.metric.startswith(f"{engine}:") for s in roles.values())


def test_the_device_sampler_reads_every_gpu_on_the_given_clock(tmp_path):
    gpus, why = nvml_gpus(FakeNvml([busy_gpu(), busy_gpu(gpu_util_pct=12)]))
    assert why is None and [g.name for g in gpus] == ["NVIDIA Fake 0", "NVIDIA Fake 1"]
    writer = SeriesWriter(tmp_path, DEVICE, DEVICE_COLUMNS)
    sampler = DeviceSampler(gpus, writer, 1.0, clock=Clock())
    sampler.sample()
    writer.close()
    rows = load_series(tmp_path, DEVICE, DEVICE_COLUMNS).set_index(["gpu", "metric"])["value"]
    assert rows[(0, "gpu_util_pct")] == 97 and rows[(1, "gpu_util_pct")] == 12
    assert rows[(0, "power_w")] == pytest.approx(370.5) and rows[(0, "memory_used_mib")] == 81_000
    assert rows[(0, "sm_clock_mhz")] == 1980 and rows[(0, "throttle_reasons")] == 0


def test_a_unified_memory_part_records_what_nvml_reports_and_notes_the_rest(tmp_path):
    gb10 = busy_gpu(memory_used_mib=NOT_SUPPORTED, memory_clock_mhz=NOT_SUPPORTED)
    gpus, _ = nvml_gpus(FakeNvml([gb10], names=["NVIDIA GB10"]))
    writer = SeriesWriter(tmp_path, DEVICE, DEVICE_COLUMNS)
    DeviceSampler(gpus, writer, 1.0).sample()
    writer.close()
    metrics = set(load_series(tmp_path, DEVICE, DEVICE_COLUMNS)["metric"])
    assert "memory_used_mib" not in metrics and {"gpu_util_pct", "power_w", "sm_clock_mhz"} <= metrics
    facts = gpus[0].facts()
    assert set(facts["not_reported"]) == {"memory_used_mib", "memory_clock_mhz"}
    assert facts["note"] == UNIFIED_MEMORY_NOTE


def test_without_a_gpu_nothing_is_recorded_and_it_is_said_in_the_run_summary_only(tmp_path, capsys):
    no_driver = lambda: nvml_gpus(FakeNvml([], init_error="Driver Not Loaded"))  # noqa: E731
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        with telemetry_sampling(tmp_path / name, 1.0, "http://s", (), find_gpus=no_driver) as telemetry:
            telemetry.measuring()
        assert telemetry.entry["device"] == {"status": "not measured", "reason": "NVML: NVMLError: Driver Not Loaded"}
        assert not (tmp_path / name / f"{DEVICE}.jsonl").exists()
    assert "GPU state" not in capsys.readouterr().err
    entry = TelemetryEntry.model_validate(telemetry.entry)
    assert gpu_note(entry) == "not measured (NVML: NVMLError: Driver Not Loaded)"


def test_sampling_marks_the_window_and_fills_the_manifest_entry(tmp_path, monkeypatch):
    clock = Clock()
    real_client = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kw: real_client(**{**kw, "transport": metrics_server()}))
    gpus = lambda: nvml_gpus(FakeNvml([busy_gpu()]))  # noqa: E731
    with telemetry_sampling(tmp_path, 60.0, "http://s", SERIES, find_gpus=gpus, clock=clock) as telemetry:
        telemetry.measuring()
        telemetry.ended()
    window, entry = telemetry.entry["window"], telemetry.entry
    assert window["warmup_start_ns"] < window["measured_start_ns"] < window["measured_end_ns"]
    server = entry["server_metrics"]
    # One scrape at the start, one where the measured requests begin, one after they end.
    assert server["status"] == "measured" and server["scrapes"] == 3 and server["series"][RUNNING] == SERIES[0].metric
    assert entry["device"]["status"] == "measured" and entry["device"]["samples"] == 2
    assert (tmp_path / "server_metrics.parquet").exists() and (tmp_path / "device.parquet").exists()


def test_sampling_off_starts_nothing(tmp_path):
    with telemetry_sampling(tmp_path, 0, "http://s", SERIES, find_gpus=pytest.fail) as telemetry:
        pass
    assert telemetry.entry["server_metrics"]["status"] == "off" and telemetry.entry["device"]["status"] == "off"
    assert list(tmp_path.iterdir()) == []
