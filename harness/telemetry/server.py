"""Scrape a server's `GET /metrics` in a background thread, keeping the series an adapter names.

Each scrape is one tidy row per sample of a named series: `t_ns` (the client's perf_counter clock,
halfway between sending the scrape and receiving its answer, since the server's gauges describe
some moment in between), `role`, `metric`, `labels` (JSON) and `value`. Only lines of the named
metrics reach `prometheus_client`'s parser, so a scrape of a server exporting hundreds of series
costs little. A server that answers 404 does not export metrics: the scraper says so once and stops.

Scraping must not distort what it observes: the scraper's thread shares the interpreter with the
event loop that stamps arrivals, so an answer is read to at most SCRAPE_MAX_BYTES (a larger one is
a failed scrape), and after each interval scrape the next ones are skipped (and counted) until
scraping has cost at most MAX_SCRAPE_SHARE of the time since, or while a scrape overran its interval.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from harness.engines.control import get_within
from harness.engines.prometheus import parse_metrics
from harness.engines.series import Series
from harness.records.timeseries import SeriesWriter
from harness.secrets import redacted

SCRAPE_DEADLINE_S = 5.0  # the whole scrape: a server trickling its answer cannot hold the scraper
SCRAPE_MAX_BYTES = 4 * 2**20  # an engine's /metrics is tens to hundreds of KB; 50 MB slowed a run tenfold
MAX_SCRAPE_SHARE = 0.05  # of the time between interval scrapes, at most this much CPU spent scraping


def scrapes_to_skip(cost_s: float, took_s: float, interval_s: float) -> int:
    """How many interval scrapes to skip after one that cost `cost_s` of CPU and took `took_s`:
    enough that scraping costs at most MAX_SCRAPE_SHARE of the time, and none due while it ran."""
    due_s = max(interval_s, cost_s / MAX_SCRAPE_SHARE, took_s)
    return math.ceil(due_s / interval_s - 1e-9) - 1


class ServerScraper:
    """Scrapes `base_url/metrics` every `interval_s` between start() and stop() into `writer`."""

    def __init__(self, base_url: str, series: Sequence[Series], writer: SeriesWriter, interval_s: float,
                 headers: dict[str, str] | None = None, clock: Callable[[], int] = time.perf_counter_ns,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url, self.writer, self.interval_s, self.clock = f"{base_url}/metrics", writer, interval_s, clock
        self.skipped = 0  # interval scrapes left out so that scraping stays cheap (scrapes_to_skip)
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
            status, text = get_within(self._http, self.url, SCRAPE_DEADLINE_S, SCRAPE_MAX_BYTES)
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
        if self.writer.error is not None:  # read but not kept (disk full): not a scrape of the series
            self._failed(f"not written: {self.writer.error}")
            return
        self.scrapes += 1

    def rows(self, text: str, t_ns: int) -> list[dict[str, Any]]:
        """The tidy rows of one scrape's text."""
        samples = parse_metrics(text, self.roles)
        self.missing -= {name for name, _ in samples}
        return [{"t_ns": t_ns, "role": self.roles[name], "metric": name,
                 "labels": json.dumps(redacted(dict(sorted(labels))), sort_keys=True), "value": value}
                for (name, labels), value in samples.items()]

    def _failed(self, why: str) -> None:
        self.failures += 1
        self.first_error = self.first_error or why

    def _loop(self) -> None:
        pause = self.interval_s
        while not self._stop.wait(pause):
            started, cost_from = time.perf_counter(), time.thread_time()
            self.scrape()
            took = time.perf_counter() - started
            skip = scrapes_to_skip(time.thread_time() - cost_from, took, self.interval_s)
            self.skipped += skip
            pause = max(0.0, (skip + 1) * self.interval_s - took)

    def summary(self) -> dict[str, Any]:
        """What the manifest records of the scraping."""
        return {"scrapes": self.scrapes, "failed_scrapes": self.failures, "skipped_scrapes": self.skipped,
                "first_error": self.first_error, "not_exported": sorted(self.missing) if self.scrapes else None}
