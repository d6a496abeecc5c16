"""Two client processes against the real SGLang test bed: every request recorded once, and the
workers' stamps on one clock (each record's wall-clock send time and its monotonic one agree across
processes), with per-request times the server's own figures bound."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from harness.metrics import derive_requests
from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args

PROMPTS, INPUT, OUTPUT = 8, 128, 24
WALL_CLOCK_READ_SLACK_NS = 5_000_000  # sent_unix_s and sent_ns are two reads, a few statements apart


def test_two_processes_at_concurrency_4(sglang_server, tmp_path):
    done = sparkbench(*synthetic_args(sglang_server, tmp_path, PROMPTS, INPUT, OUTPUT,
                                      "--concurrency", "4", "--processes", "2"))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["options"]["processes"] == 2
    assert [c["role"] for c in manifest["client_processes"]] == ["parent", "worker 0", "worker 1"]
    table = pd.read_parquet(run_dir / "requests.parquet")
    assert table["prompt_id"].is_unique and len(table) == PROMPTS
    assert (table["status"] == "ok").all() and (table["completion_tokens"] == OUTPUT).all()
    # One clock: wall-clock minus monotonic send time is the same for every request, whichever
    # process sent it (it would differ by the clocks' offset had the stamps not been moved).
    anchor = table["sent_unix_s"].to_numpy() * 1e9 - table["sent_ns"].to_numpy()
    assert np.ptp(anchor) < WALL_CLOCK_READ_SLACK_NS
    rows = derive_requests(table)
    # The client sees the first token and the end no earlier than the server made them (a stream
    # the integrity rules flag has no client TTFT: NaN, left out).
    timed = rows.dropna(subset=["ttft_ms"])
    assert len(timed) > 0 and (timed["ttft_ms"] >= timed["server_ttft_ms"]).all()
    assert (rows["e2e_ms"] >= rows["server_e2e_ms"]).all()
