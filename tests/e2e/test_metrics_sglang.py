"""Client-side metrics against SGLang's own timings for the same requests (real server).

SGLang starts its clock when it has parsed the HTTP request (`request_received_ts`), so the
client's TTFT and end-to-end latency are a few ms longer at batch 1. Stated tolerance: the client
figure is never shorter than the server's and exceeds it by less than 30 ms. TPOT divides both
offsets over the whole output, so client and server TPOT agree within 0.05 ms.
"""

from __future__ import annotations

import pytest

from harness.metrics import derive_requests
from harness.records import load_requests
from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args

CLIENT_OVER_SERVER_MAX_MS = 30.0
TPOT_TOLERANCE_MS = 0.05


@pytest.fixture(scope="module")
def derived(sglang_server, tmp_path_factory):
    results = tmp_path_factory.mktemp("timing")
    done = sparkbench(*synthetic_args(sglang_server, results, 3, 512, 256))
    assert done.returncode == 0, done.stderr
    return derive_requests(load_requests(only_run_dir(results)))


def test_ttft_agrees_with_the_server(derived):
    gap = derived["ttft_client_minus_server_ms"]
    assert gap.notna().all()
    assert (gap >= 0).all() and (gap < CLIENT_OVER_SERVER_MAX_MS).all(), gap.tolist()


def test_end_to_end_latency_agrees_with_the_server(derived):
    gap = derived["e2e_client_minus_server_ms"]
    assert (gap >= 0).all() and (gap < CLIENT_OVER_SERVER_MAX_MS).all(), gap.tolist()


def test_tpot_agrees_with_the_server_derived_tpot(derived):
    difference = (derived["tpot_ms"] - derived["server_tpot_ms"]).abs()
    assert (difference < TPOT_TOLERANCE_MS).all(), difference.tolist()
