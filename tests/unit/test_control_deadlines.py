"""Control-plane requests against a server that trickles a byte at a time: each ends at its total
deadline, in one line, instead of holding the run for as long as the server keeps sending."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from harness.engines.base import ServerUnreachable
from harness.engines.control import BoundedClient
from harness.engines.detect import detect_engine
from harness.engines.sse import Session
from harness.records.timeseries import SERVER_COLUMNS, SERVER_METRICS, SeriesWriter
from harness.telemetry.server import ServerScraper
from tests.fakes.broken_server import TRICKLE_GAP_S, Breakage, breaking

DEADLINE_S = 4 * TRICKLE_GAP_S  # several bytes arrive, each well within any read timeout


def test_detection_ends_at_its_deadline():
    with breaking(Breakage("trickle")) as url, pytest.raises(ServerUnreachable, match="no complete answer within"):
        detect_engine(url, timeout_s=DEADLINE_S)


def test_a_facts_request_ends_at_its_deadline():
    with breaking(Breakage("trickle")) as url, BoundedClient(deadline_s=DEADLINE_S) as http:
        with pytest.raises(httpx.TimeoutException, match="no complete answer within"):
            http.get(f"{url}/server_info")


def test_a_counters_request_inside_a_run_ends_at_its_deadline(monkeypatch):
    monkeypatch.setattr("harness.engines.sse.CONTROL_DEADLINE_S", DEADLINE_S)

    async def scrape(url: str) -> None:
        async with Session(read_timeout_s=30.0) as http:
            await http.get(f"{url}/metrics")

    with breaking(Breakage("trickle")) as url, pytest.raises(httpx.TimeoutException, match="no complete answer"):
        asyncio.run(scrape(url))


def test_a_metrics_scrape_ends_at_its_deadline_and_counts_as_failed(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.telemetry.server.SCRAPE_DEADLINE_S", DEADLINE_S)
    writer = SeriesWriter(tmp_path, SERVER_METRICS, SERVER_COLUMNS)
    with breaking(Breakage("trickle")) as url:
        scraper = ServerScraper(url, (), writer, 60.0)
        scraper.scrape()
    assert scraper.failures == 1 and "no complete answer within" in scraper.first_error
