"""Server metrics over time on real engines: SGLang and vLLM on the CPU test bed, and llama.cpp.

Each engine's `/metrics` series are scraped every 0.25 s through a synthetic run at concurrency 1 and
4, and at every scrape inside the measured window the server's running plus queued requests are set
beside the client's requests in flight. They are not read at the same instant, so the stated
tolerances differ by what each engine does:
- The client can only see a request end after the server let it go: on a busy host the last bytes
  wait in the socket (hundreds of ms were seen on CI's shared cores), so at a scrape the client may
  count a request the server has finished. Scrapes where the server counts fewer than the client
  are that lag, and prove nothing either way.
- The server counting more than the client is what a wrong join would show. SGLang refreshes its
  gauges when it logs a batch (every prefill, and every 40 decode steps) and llama.cpp counts its
  busy slots when asked: the server is above the client at one scrape at most, or the two agree at
  no fewer than AGREE_SHARE of the scrapes (a request just finished may still be counted), and they
  agree at one scrape at least.
- vLLM on the CPU test bed holds a stream's bytes for hundreds of ms between its API server and
  the client (docs/vllm-streaming.md), and its `/metrics` answers wait the same way. Stated
  tolerance: the server counts more than the client at no more than one scrape.
Everywhere: the server never runs more requests than the concurrency, nothing is queued at batch 1,
and the server's own output-token counter matches the client's records (no warning).
"""

from __future__ import annotations

import math

import pytest

from harness.analysis.run import Run
from harness.analysis.telemetry import in_flight_check, measured_window, telemetry_warnings
from harness.engines.series import RUNNING
from harness.metrics.timeline import NS_PER_S
from harness.report.timeline import plot_run_timeline
from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args

INPUT, OUTPUT = 64, 256
PROMPTS = {1: 6, 4: 12}
AGREE_SHARE = 0.75
SCRAPE_S = 0.25
MIN_SCRAPES = 2  # scrapes inside the measured window (vLLM's /metrics can take a second to answer on 2 cores)
# The window a run is sized for: a scrape can fall where the client still counts a request the server
# has let go (the lag above), and on a fast host the test bed's requests last tens of ms, so two
# scrapes can both land in that lag; eight make "they agree at one scrape at least" a property.
SIZED_SCRAPES = 8
RESIZES = 3  # at most this many longer runs where a run ended before its scrapes
HELD_STREAMS = "vllm"  # the engine whose test-bed streams reach the client late


def _one_run(server, results, prompts: int, concurrency: int) -> Run:
    done = sparkbench(*synthetic_args(server, results, prompts, INPUT, OUTPUT,
                                      "--concurrency", str(concurrency), "--scrape-interval", str(SCRAPE_S)))
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


def _telemetry_run(server, results, concurrency: int) -> Run:
    """A run long enough for the scrapes the tests read: sized by what it must observe, not by a
    count. On a host fast enough to finish before SIZED_SCRAPES scrapes, the run is repeated with its
    prompts scaled by the window it had against the window the scrapes need."""
    prompts = PROMPTS[concurrency]
    for attempt in range(RESIZES + 1):
        run = _one_run(server, results / f"attempt-{attempt}", prompts, concurrency)
        window = measured_window(run)
        if len(in_flight_check(run)) >= SIZED_SCRAPES or window is None:
            return run
        seconds = max((window[1] - window[0]) / NS_PER_S, SCRAPE_S / 4)
        prompts = math.ceil(prompts * (SIZED_SCRAPES + 2) * SCRAPE_S / seconds)
    return run


@pytest.fixture(scope="module", params=["sglang_server", "vllm_server", "llamacpp_server"])
def server(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module", params=[1, 4])
def run(server, request, tmp_path_factory):
    return _telemetry_run(server, tmp_path_factory.mktemp(f"telemetry-c{request.param}"), request.param)


def test_the_engines_series_are_scraped_through_the_measured_window(run):
    entry = run.manifest["telemetry"]
    assert entry["server_metrics"]["status"] == "measured", entry["server_metrics"]
    assert entry["server_metrics"]["failed_scrapes"] == 0
    assert not run.server_metrics[run.server_metrics["role"] == RUNNING].empty
    assert len(in_flight_check(run)) >= MIN_SCRAPES
    assert (run.path / "server_metrics.parquet").exists()


def test_server_running_agrees_with_the_clients_requests_in_flight(run):
    check = in_flight_check(run)
    server_side = check["server_running"] + check["server_queued"]
    agree = (server_side == check["client_in_flight"]).mean()
    above = int((server_side > check["client_in_flight"]).sum())
    print(f"\n{run.label}: server running + queued = client in flight at {agree:.0%} of {len(check)} scrapes; "
          f"server above the client at {above}")
    assert (check["server_running"] <= run.concurrency).all(), check.to_dict("records")
    if run.engine_and_api[0] == HELD_STREAMS:
        assert above <= 1, check.to_dict("records")
    else:
        assert agree > 0 and (above <= 1 or agree >= AGREE_SHARE), check.to_dict("records")


def test_no_warning_on_a_quiet_server(run):
    """Nothing queued at batch 1, no preemption, and the server counted the tokens the client got."""
    assert telemetry_warnings(run) == []


def test_the_timeline_draws_the_servers_series(run, tmp_path):
    png, svg = plot_run_timeline(run, tmp_path)
    assert png.stat().st_size > 0 and "server running" in svg.read_text()
