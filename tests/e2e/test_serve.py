"""`sparkbench serve`: a profile launched, healthy, and gone after Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx


def test_serve_starts_the_profile_and_ctrl_c_stops_everything():
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--profile", "cpu-testbed"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once the server is healthy
        url = re.search(r"at (http://127\.0\.0\.1:\d+)", line).group(1)
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(url + "/server_info", timeout=10).json()["device"] == "cpu"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()
    port = url.rsplit(":", 1)[1]
    assert subprocess.run(["pgrep", "-f", f"--port {port}"], capture_output=True).stdout == b""
