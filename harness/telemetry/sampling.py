"""Server metrics and GPU state sampled from the warm-up to the end of the measured requests.

`telemetry_sampling` starts the scraper and the device sampler in background threads, yields a
`Telemetry` whose `measuring()` marks where the measured requests begin (with a scrape right
there, so counters can be read over the measured requests alone), and stops both when the block
ends, whatever ends it. Its `entry` is the manifest's `telemetry` record: the interval, the window
marks on the client's clock, and per source its status (`measured`, `not exported` /
`not measured` with the reason, or `off`), file and what it did not report. A machine without a
GPU prints nothing here: the run's summary says "GPU state: not measured (why)".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.engines.series import Series
from harness.records.timeseries import DEVICE, DEVICE_COLUMNS, SERVER_COLUMNS, SERVER_METRICS, SeriesWriter
from harness.telemetry.device import DeviceSampler, Gpu, nvml_gpus
from harness.telemetry.server import ServerScraper

DEFAULT_INTERVAL_S = 1.0
OFF = {"status": "off", "reason": "telemetry sampling disabled (--no-telemetry or --scrape-interval 0)"}


class Telemetry:
    """The running samplers of one run and the manifest entry they fill."""

    def __init__(self, interval_s: float, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.entry: dict[str, Any] = {"interval_s": interval_s, "window": {"warmup_start_ns": clock()}}
        self.scraper: ServerScraper | None = None

    def measuring(self) -> None:
        """The measured requests start now: scrape once more, then mark the time."""
        if self.scraper is not None and self.scraper.not_exported is None:
            self.scraper.scrape()
        self.entry["window"]["measured_start_ns"] = self.clock()

    def ended(self) -> None:
        """The measured requests are over (the first call counts: the block's end comes later)."""
        self.entry["window"].setdefault("measured_end_ns", self.clock())


def _server_entry(scraper: ServerScraper | None, series: Sequence[Series]) -> dict[str, Any]:
    if scraper is None:
        return {"status": "not exported", "reason": "the engine's adapter names no /metrics series"}
    if scraper.not_exported:
        return {"status": "not exported", "reason": scraper.not_exported}
    return {"status": "measured", "file": f"{SERVER_METRICS}.parquet",
            "series": {s.role: s.metric for s in series}, **scraper.summary()}


def _device_entry(gpus: list[Gpu], why: str | None, sampler: DeviceSampler | None) -> dict[str, Any]:
    if not gpus:
        return {"status": "not measured", "reason": why}
    return {"status": "measured", "file": f"{DEVICE}.parquet", "samples": sampler.samples if sampler else 0,
            "gpus": [gpu.facts() for gpu in gpus]}


@contextmanager
def telemetry_sampling(run_path: Path, interval_s: float, base_url: str, series: Sequence[Series],
                       headers: dict[str, str] | None = None,
                       find_gpus: Callable[[], tuple[list[Gpu], str | None]] = nvml_gpus,
                       clock: Callable[[], int] = time.perf_counter_ns) -> Iterator[Telemetry]:
    """Sample while the block runs; the yielded `Telemetry.entry` is complete when it ends."""
    telemetry = Telemetry(interval_s, clock)
    if interval_s <= 0:
        telemetry.entry.update(server_metrics=OFF, device=OFF)
        yield telemetry
        return
    gpus, why = find_gpus()
    server_out = SeriesWriter(run_path, SERVER_METRICS, SERVER_COLUMNS)
    device_out = SeriesWriter(run_path, DEVICE, DEVICE_COLUMNS) if gpus else None
    scraper = ServerScraper(base_url, series, server_out, interval_s, headers, clock) if series else None
    device = DeviceSampler(gpus, device_out, interval_s, clock) if gpus else None
    telemetry.scraper = scraper
    started = [s for s in (scraper, device) if s is not None]
    try:
        for sampler in started:
            sampler.start()
        telemetry.entry.update(server_metrics=_server_entry(scraper, series), device=_device_entry(gpus, why, device))
        yield telemetry
    finally:
        telemetry.ended()
        for sampler in started:
            sampler.stop()
        for writer in (w for w in (server_out, device_out) if w is not None):
            writer.close()
        telemetry.entry.update(server_metrics=_server_entry(scraper, series), device=_device_entry(gpus, why, device))
