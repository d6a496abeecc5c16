"""Control-plane requests against a server that trickles a byte at a time: each ends at its total
deadline, in one line, instead of holding the run for as long as the server keeps sending."""

from __future__ import annotations

import asyncio
import zlib

import httpx
import pytest

from harness.engines.base import ServerUnreachable
from harness.engines.control import BoundedClient, get_within
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


def _gzip_bomb(inflated_bytes: int) -> bytes:
    """A gzip body of zeros that inflates to `inflated_bytes` (about a thousandth of that on the wire)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(2**20)
    return b"".join(packer.compress(block) for _ in range(inflated_bytes // len(block))) + packer.flush()


def _bomb_answers(inflated_bytes: int) -> httpx.MockTransport:
    body = _gzip_bomb(inflated_bytes)
    return httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"content-encoding": "gzip", "content-type": "application/json"}, content=body))


def test_a_compressed_control_answer_is_read_only_to_its_inflated_limit(monkeypatch):
    monkeypatch.setattr("harness.engines.control.MAX_ANSWER_BYTES", 2**20)
    with BoundedClient(transport=_bomb_answers(64 * 2**20)) as http:
        with pytest.raises(httpx.HTTPError, match="more than 1 MiB"):
            http.get("http://server/server_info")


def test_a_compressed_answer_within_the_limit_reads_as_its_inflated_text():
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = packer.compress(b'{"model": "m"}') + packer.flush()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers={"content-encoding": "gzip"},
                                                                   content=body))
    with BoundedClient(transport=transport) as http:
        assert http.get("http://server/server_info").json() == {"model": "m"}


def test_a_compressed_metrics_scrape_is_read_only_to_its_inflated_limit(monkeypatch):
    monkeypatch.setattr("harness.engines.control.MAX_ANSWER_BYTES", 2**20)
    with httpx.Client(transport=_bomb_answers(64 * 2**20)) as http:
        with pytest.raises(httpx.HTTPError, match="more than 1 MiB"):
            get_within(http, "http://server/metrics", 60.0)
