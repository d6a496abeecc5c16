"""A server behind a gateway that wants a header of its own: with `--header` every request the
client makes (engine detection, the server's facts, model listing, the run's streams and
scrapes) carries it, so detection and a short run succeed; without it detection is refused in
one line that names the credentials, before any run directory is made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines.base import ServerHTTPError
from harness.engines.detect import detect_engine
from tests.fakes.gated_server import gated
from tests.fakes.stream_server import Script

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

GATE = ("X-Gateway-Key", "gateway-secret-7")
GSM8K = ["run", "gsm8k", "--limit", "2", "--max-new-tokens", "4", "--warmup", "1", "--no-progress"]


@pytest.mark.parametrize("api, engine", [("sglang", "sglang"), ("openai", "vllm")])
def test_detection_sends_the_headers_it_is_given(api, engine):
    with gated(Script(api=api), *GATE) as (url, refused):
        assert detect_engine(url, headers=dict([GATE])).name == engine
        assert refused == []
        with pytest.raises(ServerHTTPError) as stopped:
            detect_engine(url)
    assert str(stopped.value) == (f"{url} refused sparkbench's requests (HTTP 401); it wants credentials "
                                  "(--api-key, or --header NAME:VALUE)")


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_a_run_through_the_gateway_sends_the_header_on_every_request(tmp_path, api):
    results = tmp_path / "runs"
    with gated(Script(api=api), *GATE) as (url, refused):
        done = CliRunner().invoke(app, [*GSM8K, "--server", url, "--results", str(results),
                                        "--header", f"{GATE[0]}: {GATE[1]}"])
    assert done.exit_code == 0, done.output
    assert refused == []
    written = "".join(p.read_bytes().decode("utf-8", "replace") for p in results.rglob("*") if p.is_file())
    assert "X-Gateway-Key:***" in written and GATE[1] not in written  # the value masked, as before


def test_a_run_without_the_header_is_refused_in_one_line_before_any_run_directory(tmp_path):
    results = tmp_path / "runs"
    with gated(Script(api="sglang"), *GATE) as (url, refused):
        done = subprocess.run([sys.executable, "-m", "harness.cli", *GSM8K, "--server", url,
                               "--results", str(results)], capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).parents[2])
    assert done.returncode == ServerHTTPError.exit_code
    assert done.stderr.strip().splitlines() == [f"sparkbench: {url} refused sparkbench's requests (HTTP 401); "
                                                "it wants credentials (--api-key, or --header NAME:VALUE)"]
    assert refused and not results.exists()
