"""Benchmark: how closely the open loop keeps its arrival schedule, over real sockets. Not a test:
prints figures.

Run from the repository root (with nothing else heavy on the host, for the timing figures):
`.venv/bin/python -m tests.bench_openloop [--requests 1000] [--rate 200]`

Against the project's fast local server (`tests/fakes/fast_server.py`, its own process), two cases:
- keeps up: `--requests` Poisson arrivals at `--rate` requests/s, 16 tokens each streamed at 1,000
  tokens/s: the offered rate (of the drawn schedule) against the achieved rate (of the actual sends),
  and the send lag. Targets: achieved within 2% of offered, median lag under 1 ms.
- too slow: the same schedule against a server that admits 4 requests at once (`--max-concurrency
  4`) and streams 64 tokens at 100 tokens/s, far below the rate: the lag warning must appear and
  response times (from the due time) exceed service times (from the send).
Each request goes through the open-loop pool and becomes an ordinary record; every figure is
computed by the project's metric functions from those records.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from harness.engines.sglang import SGLangBackend
from harness.engines.sse import Session, run_streams
from harness.metrics import derive_requests
from harness.metrics.load import lag_warning, load_values
from harness.records.requests import COLUMNS, RequestRecord
from harness.run.arrivals import drawn_offsets
from harness.run.openloop import OpenLoopPool
from harness.run.pool import StopRules
from harness.spec import Prompt, SamplingParams
from tests.fakes.fast_server import fast_server

ACHIEVED_WITHIN = 0.02
MEDIAN_LAG_MS = 1.0


def open_loop(rate: float, requests: int, tokens: int, token_rate: float,
              max_concurrency: int | None) -> tuple[pd.DataFrame, float]:
    """Records of `requests` Poisson arrivals at `rate` against the fast server, and the client's
    CPU seconds while sending them."""
    prompt = Prompt("bench", SamplingParams(max_new_tokens=tokens), input_ids=(1, 2, 3))
    backend, results = SGLangBackend(), []
    offsets = drawn_offsets(rate, 1.0, seed=0, count=requests)
    with fast_server(token_rate) as url:
        async def run() -> float:
            async with Session(read_timeout_s=120.0) as http:
                await backend.send(http, url, prompt)  # a first stream, not counted: set-up costs
                pool = OpenLoopPool(send=lambda p: backend.send(http, url, p),
                                    record=lambda seq, p, r: results.append((seq, p, r)),
                                    rules=StopRules(max_errors=0), offsets_ns=[round(o * 1e9) for o in offsets],
                                    max_concurrency=max_concurrency)
                cpu = time.process_time()
                await pool.run([(seq, replace(prompt, prompt_id=f"r{seq}")) for seq in range(requests)])
                return time.process_time() - cpu

        cpu_s = run_streams(run())
    records = [asdict(RequestRecord.build(run_id="bench", seq=seq, workload="bench", engine="sglang", api="sglang",
                                          prompt=p, result=r)) for seq, p, r in results]
    return derive_requests(pd.DataFrame(records, columns=COLUMNS)), cpu_s


def percentiles(values: np.ndarray) -> str:
    p50, p90, p99 = np.nanpercentile(values, [50, 90, 99])
    return f"p50 {p50:8.3f}  p90 {p90:8.3f}  p99 {p99:8.3f}  max {np.nanmax(values):8.3f}"


def report(name: str, derived: pd.DataFrame, cpu_s: float) -> dict[str, float]:
    values = load_values(derived)
    failed = int((derived["status"] != "ok").sum())
    print(f"\n[{name}] {len(derived)} requests, {failed} failed, client CPU {cpu_s:.2f} s")
    print(f"  offered rate  {values['offered_rate_rps']:8.2f} req/s (the drawn schedule's own)")
    print(f"  achieved rate {values['achieved_rate_rps']:8.2f} req/s "
          f"({values['achieved_rate_rps'] / values['offered_rate_rps'] - 1:+.2%})")
    print(f"  send lag ms          {percentiles(derived['send_lag_ms'].to_numpy(dtype=float))}")
    print(f"  service e2e ms       {percentiles(derived['e2e_ms'].to_numpy(dtype=float))}")
    print(f"  response e2e ms      {percentiles(derived['response_e2e_ms'].to_numpy(dtype=float))}")
    print(f"  lag warning: {lag_warning(derived) or 'none'}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}  host {os.uname().nodename}  load {os.getloadavg()}")
    derived, cpu_s = open_loop(args.rate, args.requests, tokens=16, token_rate=1000.0, max_concurrency=None)
    values = report("keeps up", derived, cpu_s)
    off = abs(values["achieved_rate_rps"] / values["offered_rate_rps"] - 1)
    median_lag = float(np.nanmedian(derived["send_lag_ms"]))
    print(f"  targets: achieved within {ACHIEVED_WITHIN:.0%} of offered: {'yes' if off <= ACHIEVED_WITHIN else 'NO'}"
          f"; median lag under {MEDIAN_LAG_MS:g} ms: {'yes' if median_lag < MEDIAN_LAG_MS else 'NO'}")
    slow = max(50, args.requests // 10)
    derived, cpu_s = open_loop(args.rate, slow, tokens=64, token_rate=100.0, max_concurrency=4)
    report("too slow (4 admitted at once)", derived, cpu_s)
    behind = bool(lag_warning(derived))
    longer = float(np.nanmedian(derived["response_e2e_ms"])) > float(np.nanmedian(derived["e2e_ms"]))
    print(f"  checks: lag warning {'yes' if behind else 'NO'}; median response e2e over median service e2e: "
          f"{'yes' if longer else 'NO'}")


if __name__ == "__main__":
    main()
