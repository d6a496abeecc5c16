"""Scrape a server's `GET /metrics` in a background thread, keeping the series an adapter names.

Each scrape is one tidy row per sample of a named series: `t_ns` (the client's perf_counter clock,
halfway between sending the scrape and receiving its answer, since the server's gauges describe
some moment in between), `role`, `metric`, `labels` (JSON) and `value`. Only lines of the named
metrics reach `prometheus_client`'s parser, so a scrape of a server exporting hundreds of series
costs little. A server that answers 404 does not export metrics: the scraper says so once and stops.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from harness.engines.control import get_within
from harness.engines.prometheus import parse_metrics
from harness.engines.series import Series
from harness.records.timeseries import SeriesWriter

SCRAPE_DEADLINE_S = 5.0  # the whole scrape: a server trickling its answer cannot hold the scraper


class ServerScraper:
    """Scrapes `base_url/metrics` every `interval_s` between start() and stop() into `writer`."""

    def __init__(self, base_url: str, series: Sequence[Series], writer: SeriesWriter, interval_s: float,
                 headers: dict[str, str] | None = None, clock: Callable[[], int] = time.perf_counter_ns,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url, self.writer, self.interval_s, self.clock = f"{base_url}/metrics", writer, interval_s, clock
        self.roles = {s.metric: s.role for s in series}
        # Synchronous: boundary scrapes are taken on the run's own event loop thread.
        self._http = httpx.Client(headers=headers, timeout=SCRAPE_DEADLINE_S, transport=transport)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the loop's scrapes and a boundary scrape from the run never overlap
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
        self.scrapes, self.failures = 0, 0
        self.not_exported: str | None = None  # why the server exports nothing, once known
        self.first_error: str | None = None
        self.missing: set[str] = set(self.roles)  # named metrics not seen in any scrape yet

    def start(self) -> None:
        self.scrape()  # a reading before the first request, so the window is covered from its start
        if self.not_exported is None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.not_exported is None:
            self.scrape()  # and one after the last
        self._http.close()

    def scrape(self) -> None:
        """One scrape; a failure is counted (and the first one kept), never raised."""
        with self._lock:
            self._scrape()

    def _scrape(self) -> None:
        sent = self.clock()
        try:
            status, text = get_within(self._http, self.url, SCRAPE_DEADLINE_S)
        except httpx.HTTPError as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return
        t_ns = (sent + self.clock()) // 2
        if status == 404:
            self.not_exported = f"GET {self.url} answered 404: the server exports no metrics"
            return
        if status != 200:
            self._failed(f"HTTP {status}")
            return
        self.writer.append(self.rows(text, t_ns))
        self.scrapes += 1

    def rows(self, text: str, t_ns: int) -> list[dict[str, Any]]:
        """The tidy rows of one scrape's text."""
        samples = parse_metrics(text, self.roles)
        self.missing -= {name for name, _ in samples}
        return [{"t_ns": t_ns, "role": self.roles[name], "metric": name,
                 "labels": json.dumps(dict(sorted(labels)), sort_keys=True), "value": value}
                for (name, labels), value in samples.items()]

    def _failed(self, why: str) -> None:
        self.failures += 1
        self.first_error = self.first_error or why

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape()

    def summary(self) -> dict[str, Any]:
        """What the manifest records of the scraping."""
        return {"scrapes": self.scrapes, "failed_scrapes": self.failures, "first_error": self.first_error,
                "not_exported": sorted(self.missing) if self.scrapes else None}
