"""Load from several client processes: each with its own event loop and a share of the streams.

One process's event loop spends 10-40 us of CPU per streamed chunk (`tests.bench_client`); at
hundreds of streams of hundreds of tokens/s a single process saturates and delays the very stamps
it records. With `--processes N` the parent warms up as usual, then starts N worker processes
(spawned: no loop, thread or socket of the parent is inherited). Worker i sends prompts i, i+N,
... with its share of the concurrency, and returns each finished request's result through a queue;
the parent writes the record at once, so the records file keeps one writer and stays crash-safe.

Clocks. `perf_counter_ns()` is a per-process monotonic clock: readings of two processes are not
comparable (Linux happens to share CLOCK_MONOTONIC across processes; nothing promises it). Each
process reads a wall-clock anchor, the pair `(time.time_ns(), perf_counter_ns())`, when it starts;
the parent moves every stamp of worker i onto its own clock by `offset_i = (parent_mono -
parent_wall) - (worker_mono - worker_wall)` before the record is written. Durations inside a request
are untouched (one constant shift); times across processes (the run's span, throughput) are valid
to within the error of the two anchor reads, provided the wall clock is not stepped during the run.
The anchors and offsets are in the manifest (`client_processes`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue as queues
import signal
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from harness.engines.base import Backend, StreamResult
from harness.engines.sse import Session, run_streams
from harness.run.pool import Pool, Record, StopRules, charge_error
from harness.spec import Prompt

POLL_S = 0.2  # how often the parent looks for a stop, and workers for the parent's stop


def concurrency_share(concurrency: int, processes: int, index: int) -> int:
    """Worker `index`'s streams in flight: the concurrency split as evenly as it goes."""
    return concurrency // processes + (index < concurrency % processes)


def anchor() -> dict[str, int]:
    """This process's wall-clock anchor: a wall-clock and a monotonic reading, taken together."""
    return {"pid": os.getpid(), "wall_ns": time.time_ns(), "mono_ns": time.perf_counter_ns()}


def clock_offset(parent: dict[str, int], worker: dict[str, int]) -> int:
    """Nanoseconds to add to a worker's monotonic stamp to place it on the parent's clock."""
    return (parent["mono_ns"] - parent["wall_ns"]) - (worker["mono_ns"] - worker["wall_ns"])


def shifted(result: StreamResult, offset_ns: int) -> StreamResult:
    """The result with every monotonic stamp moved by `offset_ns` (its durations unchanged)."""
    move = lambda ns: None if ns is None else ns + offset_ns  # noqa: E731
    return replace(result, sent_ns=move(result.sent_ns), end_ns=move(result.end_ns),
                   first_token_ns=move(result.first_token_ns), last_token_ns=move(result.last_token_ns),
                   chunk_ns=[ns + offset_ns for ns in result.chunk_ns],
                   stall_ns=None if result.stall_ns is None else [ns + offset_ns for ns in result.stall_ns])


def _work(index: int, backend: Backend, options: Any, share: list[tuple[int, Prompt]], concurrency: int,
          rules: StopRules, results: Any, stop: Any, turn_stride: int) -> None:
    """A worker process: its own loop and Session; every outcome goes to the parent's queue."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us cleanly
    results.put(("anchor", index, anchor()))

    async def main() -> tuple[str | None, float]:
        cpu = time.process_time()
        async with Session(headers=options.headers, read_timeout_s=options.request_timeout_s,
                           extra_body=options.extra_body) as http:
            async def send(prompt: Prompt) -> StreamResult:
                return await http.watched(backend.send(http, options.base_url, prompt, options.deadlines(prompt)))

            async def record(seq: int, prompt: Prompt, result: StreamResult) -> None:
                # The prompt goes back with its result: a conversation's later turns exist only here.
                results.put(("record", index, seq, prompt, result))

            pool = Pool(send=send, record=record, rules=rules, concurrency=concurrency, turn_stride=turn_stride)
            watcher = asyncio.create_task(_watch(stop, pool))
            await pool.run(share)
            watcher.cancel()
        return pool.stop_reason, time.process_time() - cpu

    reason, cpu_s = run_streams(main())
    results.put(("done", index, reason, cpu_s))


def _parent_then_workers(clock: dict[str, Any]) -> int:
    """Manifest order of the clock entries, whichever worker reported first."""
    return -1 if clock["role"] == "parent" else int(clock["role"].split()[-1])


async def _watch(stop: Any, pool: Pool) -> None:
    while not stop.is_set():
        await asyncio.sleep(POLL_S)
    pool.stop("stop asked")


@dataclass
class ProcessPool:
    """Sends `(seq, prompt)` pairs from `processes` worker processes; the same contract as `Pool`:
    `record` is called (in this process) for every outcome, and `stop` stops issuing everywhere."""

    backend: Backend
    options: Any  # RunOptions
    record: Record
    rules: StopRules
    processes: int
    turn_stride: int = 0  # as Pool's
    stop_reason: str | None = None
    errors: Counter = field(default_factory=Counter)
    clocks: list[dict[str, int]] = field(default_factory=list)
    cpu_s: float = 0.0

    def __post_init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._stop = self._context.Event()

    def stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    async def run(self, work: list[tuple[int, Prompt]]) -> None:
        results = self._context.Queue()
        parent, offsets = anchor(), {}
        self.clocks = [{"role": "parent", **parent}]
        workers = [self._context.Process(target=_work, daemon=True, args=(
            i, self.backend, self.options, work[i::self.processes],
            concurrency_share(self.options.concurrency, self.processes, i), self.rules, results, self._stop,
            self.turn_stride))
            for i in range(self.processes)]
        for worker in workers:
            worker.start()
        running = set(range(self.processes))
        loop = asyncio.get_running_loop()
        while running:
            try:
                message = await loop.run_in_executor(None, results.get, True, POLL_S)
            except queues.Empty:
                for index in [i for i in running if workers[i].exitcode not in (None, 0)]:
                    self.stop(f"client process {index} ended unexpectedly (exit code {workers[index].exitcode})")
                    running.discard(index)
                continue
            kind, index, *rest = message
            if kind == "anchor":
                offsets[index] = clock_offset(parent, rest[0])
                self.clocks.append({"role": f"worker {index}", **rest[0], "offset_ns": offsets[index]})
                self.clocks.sort(key=_parent_then_workers)
            elif kind == "record":
                seq, prompt, result = rest
                await self.record(seq, prompt, shifted(result, offsets[index]))
                self._count(prompt, result)
            else:
                running.discard(index)
                self.stop_reason = self.stop_reason or rest[0]
                self.cpu_s += rest[1]
        for worker in workers:
            worker.join()

    def _count(self, prompt: Prompt, result: StreamResult) -> None:
        """The error budget is the run's, over every process."""
        reason = charge_error(self.errors, self.rules, prompt, result)
        if reason:
            self.stop(reason)
