"""Server-side timings of one request, as the engine reported them, beside the client's own.

The two clocks start at different moments: SGLang stamps `request_received_ts` after parsing the
HTTP body, so its latencies miss the client's send and the server's parse (3-6 ms at batch 1, far
more under concurrency). The `*_client_minus_server_ms` columns show that gap per request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.metrics.values import lookup, number, ratio

MS_PER_S = 1000.0


def sglang_server_times_ms(meta: dict[str, Any]) -> tuple[float, float]:
    """(TTFT, e2e) in ms from SGLang meta_info `first_token_latency`, `e2e_latency` (both in SECONDS).

    `first_token_latency` is present only when the server runs with `--enable-metrics`.
    """
    return number(meta.get("first_token_latency")) * MS_PER_S, number(meta.get("e2e_latency")) * MS_PER_S


def vllm_server_times_ms(meta: dict[str, Any]) -> tuple[float, float]:
    """(TTFT, e2e) in ms from vLLM per-request metrics: `time_to_first_token_ms` and
    `time_to_first_token_ms + generation_time_ms` (present with `--enable-per-request-metrics`)."""
    ttft = number(lookup(meta, "metrics", "time_to_first_token_ms"))
    return ttft, ttft + number(lookup(meta, "metrics", "generation_time_ms"))


def _no_server_times(meta: dict[str, Any]) -> tuple[float, float]:
    return math.nan, math.nan


# The record's `backend` says how its meta object is shaped; "openai" carries vLLM's metrics.
READERS: dict[str, Callable[[dict[str, Any]], tuple[float, float]]] = {
    "sglang": sglang_server_times_ms,
    "openai": vllm_server_times_ms,
}


def server_times_ms(meta: dict[str, Any], backend: str) -> tuple[float, float]:
    """(server TTFT, server e2e) in ms for one request; NaN for fields the server did not report."""
    return READERS.get(backend, _no_server_times)(meta)


def server_columns(
    metas: list[dict[str, Any]],
    backends: list[str],
    completion_tokens: np.ndarray,
    ttft_ms: np.ndarray,
    e2e_ms: np.ndarray,
) -> dict[str, np.ndarray]:
    """Server timing columns and the client-minus-server differences, all in ms.

    server_tpot_ms = (server_e2e_ms - server_ttft_ms) / (completion_tokens - 1), NaN at <= 1 token.
    """
    times = np.array([server_times_ms(m, b) for m, b in zip(metas, backends)], dtype=float).reshape(-1, 2)
    server_ttft, server_e2e = times[:, 0], times[:, 1]
    return {
        "server_ttft_ms": server_ttft,
        "server_e2e_ms": server_e2e,
        "server_tpot_ms": ratio(server_e2e - server_ttft, completion_tokens - 1),
        "ttft_client_minus_server_ms": ttft_ms - server_ttft,
        "e2e_client_minus_server_ms": e2e_ms - server_e2e,
    }
