"""Benchmark: the client's CPU per streamed chunk with the telemetry samplers on and off.

Not a test: prints figures. Run from the repository root: `.venv/bin/python -m tests.bench_telemetry`.
One client process streams from the project's fast local server (`tests/fakes/fast_server.py`, its
own process), which also answers `GET /metrics` with a text the size of SGLang's. Sampling on runs
what a run runs: the `/metrics` scraper and the NVML device sampler (here reading the NVML test
double of `tests/fakes/nvml.py`, as the host has no GPU) in background threads of the same
process, at the default 1 s and at 0.1 s. Rounds alternate off / on so that a drift of the host's
load hits both; each prints the client CPU per chunk (all the process's threads, samplers included).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from harness.engines.registry import engine_named
from harness.engines.sglang import SGLangBackend
from harness.engines.sse import Session, run_streams
from harness.spec import Prompt, SamplingParams
from harness.telemetry.device import nvml_gpus
from harness.telemetry.sampling import telemetry_sampling
from tests.fakes.fast_server import fast_server
from tests.fakes.nvml import FakeNvml, busy_gpu


def one_round(url: str, streams: int, tokens: int, interval_s: float) -> float:
    """Client CPU microseconds per chunk over `streams` concurrent streams of `tokens` chunks."""
    prompt = Prompt("bench", SamplingParams(max_new_tokens=tokens), input_ids=(1, 2, 3))
    series = engine_named("sglang").server_series

    async def run() -> tuple[list, float]:
        async with Session(read_timeout_s=60.0) as http:
            await SGLangBackend().send(http, url, prompt)  # set-up costs stay out of the figure
            with tempfile.TemporaryDirectory() as folder, \
                    telemetry_sampling(Path(folder), interval_s, url, series,
                                       find_gpus=lambda: nvml_gpus(FakeNvml([busy_gpu()]))) as telemetry:
                telemetry.measuring()
                cpu = time.process_time()
                results = await asyncio.gather(*(SGLangBackend().send(http, url, prompt) for _ in range(streams)))
                return results, time.process_time() - cpu

    results, cpu = run_streams(run())
    assert all(r.error_kind is None and r.completion_tokens == tokens for r in results)
    return cpu / sum(len(r.chunk_ns) for r in results) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=200.0, help="chunks per second per stream")
    args = parser.parse_args()
    shapes = ((1, 1024), (16, 256))
    modes = {"off": 0.0, "on, every 1 s": 1.0, "on, every 0.1 s": 0.1}
    print(f"{'streams':>7} {'tokens':>6} {'sampling':>16} {'CPU us/chunk, mean':>19} {'sd':>6} {'rounds':>6}")
    with fast_server(args.rate) as url:
        for streams, tokens in shapes:
            figures: dict[str, list[float]] = {mode: [] for mode in modes}
            for _ in range(args.rounds):
                for mode, interval in modes.items():
                    figures[mode].append(one_round(url, streams, tokens, interval))
            for mode, values in figures.items():
                print(f"{streams:>7} {tokens:>6} {mode:>16} {statistics.mean(values):>19.1f} "
                      f"{statistics.stdev(values):>6.1f} {len(values):>6}", flush=True)


if __name__ == "__main__":
    main()
