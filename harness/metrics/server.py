"""Server-side timings of one request, as the engine reported them, beside the client's own.

The two clocks start at different moments: SGLang stamps `request_received_ts` after parsing the
HTTP body, so its latencies miss the client's send and the server's parse (3-6 ms at batch 1, far
more under concurrency). The `*_client_minus_server_ms` columns show that gap per request.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.engines.registry import meta_reader
from harness.metrics.values import ratio


def server_times_ms(meta: dict[str, Any], engine: str) -> tuple[float, float]:
    """(server TTFT, server e2e) in ms for one request, read by its engine's adapter; NaN for
    fields the server did not report."""
    return meta_reader(engine).server_times_ms(meta)


def server_columns(
    metas: list[dict[str, Any]],
    engines: list[str],
    completion_tokens: np.ndarray,
    ttft_ms: np.ndarray,
    e2e_ms: np.ndarray,
) -> dict[str, np.ndarray]:
    """Server timing columns and the client-minus-server differences, all in ms.

    server_tpot_ms = (server_e2e_ms - server_ttft_ms) / (completion_tokens - 1), NaN at <= 1 token.
    """
    times = np.array([server_times_ms(m, b) for m, b in zip(metas, engines)], dtype=float).reshape(-1, 2)
    server_ttft, server_e2e = times[:, 0], times[:, 1]
    return {
        "server_ttft_ms": server_ttft,
        "server_e2e_ms": server_e2e,
        "server_tpot_ms": ratio(server_e2e - server_ttft, completion_tokens - 1),
        "ttft_client_minus_server_ms": ttft_ms - server_ttft,
        "e2e_client_minus_server_ms": e2e_ms - server_e2e,
    }
