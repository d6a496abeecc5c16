"""The open-loop dispatcher: each request is sent when the arrival schedule says, not when a slot frees.

Request i is due at `start + offsets[i]` (absolute times on the perf_counter clock, so a late send
never delays the ones after it). The dispatcher sleeps until a little before the due time, then
yields to the event loop until the moment itself: the loop's own timers are only as fine as a
millisecond, and a send lag of that size would blur the latencies it measures. Each request then
runs as its own task; its record keeps the due time (`scheduled_ns`) beside the client's own send
stamp, so the lag of a client that fell behind is measured, never hidden (no coordinated omission).

With `max_concurrency`, a due request waits for a free slot; that wait is part of its lag too.
Failures, the error budget, an unreachable server and a stop asked for behave as in the closed loop
(`harness.run.pool`): no new request is sent once the pool stops, those in flight end and are kept.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from harness.chat import next_turn
from harness.errors import SparkbenchError
from harness.run.arrivals import schedule_of, windows
from harness.run.load_options import LoadOptions
from harness.run.pool import Pool
from harness.spec import Prompt
from workloads import Workload

SPIN_NS = 2_000_000  # the last stretch before a due time is waited by yielding, not by a timer
START_DELAY_NS = 20_000_000  # the first request is due this long after dispatch begins
WAKE_NS = 100_000_000  # a long wait wakes this often to see whether the run was stopped


async def sleep_until(due_ns: int, stopped: Callable[[], bool] = lambda: False) -> None:
    """Return at `due_ns` (perf_counter ns) or just after, or soon after `stopped()` turns true: timers
    of at most WAKE_NS for all but the last SPIN_NS, then yields to the loop (other tasks keep
    running) until the clock reaches it."""
    while not stopped() and (remaining := due_ns - time.perf_counter_ns()) > SPIN_NS:
        await asyncio.sleep(min(remaining - SPIN_NS, WAKE_NS) / 1e9)
    while not stopped() and time.perf_counter_ns() < due_ns:
        await asyncio.sleep(0)


@dataclass
class OpenLoopPool(Pool):
    """Sends `(seq, prompt)` pairs at `offsets_ns` after the start (one offset per pair, in order)."""

    offsets_ns: list[int] = field(default_factory=list)
    max_concurrency: int | None = None

    async def run(self, work: list[tuple[int, Prompt]]) -> None:
        if len(self.offsets_ns) != len(work):
            raise ValueError(f"{len(work)} requests but {len(self.offsets_ns)} scheduled send times")
        # A full garbage collection walks every object the process holds (pandas and all): on a busy
        # host one took 100-200 ms and left the sends it overlapped that late. Objects made before the
        # run are set aside for its length, so a collection walks only what the run allocates.
        gc.collect()
        gc.freeze()
        try:
            await self._dispatch(work)
        finally:
            gc.unfreeze()

    async def _dispatch(self, work: list[tuple[int, Prompt]]) -> None:
        slots = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        start = time.perf_counter_ns() + START_DELAY_NS
        tasks = []
        for (seq, prompt), offset in zip(work, self.offsets_ns):
            await sleep_until(start + offset, lambda: self.stop_reason is not None)
            if slots is not None:
                await slots.acquire()
            if self.stop_reason is not None:
                break
            tasks.append(asyncio.create_task(self._one(seq, prompt, start + offset, slots)))
        await asyncio.gather(*tasks)

    async def _one(self, seq: int, prompt: Prompt | None, due_ns: int, slots: asyncio.Semaphore | None) -> None:
        """Send one request (again, once the server is back, if the connection was refused) and
        record it with its due time; then, while each turn succeeds, the later turns of its
        conversation (`harness.chat.next_turn`), each sent when the answer before it ends: they
        follow their answer, not the schedule, so they have no due time."""
        try:
            due: int | None = due_ns
            while prompt is not None and self.stop_reason is None:
                result = await self.attempt(prompt)
                if result is None:
                    continue
                result.scheduled_ns = due
                await self.record(seq, prompt, result)
                self._count(prompt, result)
                prompt = next_turn(prompt, result.text) if result.error_kind is None else None
                seq, due = seq + self.turn_stride, None
        finally:
            if slots is not None:
                slots.release()


@dataclass(frozen=True)
class OpenLoopWork:
    """What an open-loop run sends: its prompts in order, each one's offset (s) and window."""

    prompts: list[Prompt]
    offsets_s: np.ndarray
    windows: list[str]

    @property
    def offsets_ns(self) -> list[int]:
        return [round(offset * 1e9) for offset in self.offsets_s]

    def window(self, seq: int) -> str:
        """The window of the request recorded as `seq` (a later turn: that of its conversation's first)."""
        return self.windows[seq % len(self.windows)]


def open_loop_work(options: LoadOptions, workload: Workload) -> OpenLoopWork:
    """The schedule (drawn for the workload's prompt count, or for `duration_s`, or replayed) and as
    many prompts as it has arrivals (`prompts_for`)."""
    own = workload.prompts()
    fixed_count = options.duration_s is None and options.schedule is None
    offsets = schedule_of(options, len(own) if fixed_count else None)
    if not len(offsets):
        raise SparkbenchError("the arrival schedule holds no request (is --duration shorter than the first gap?)")
    return OpenLoopWork(prompts_for(workload, own, len(offsets)), offsets, windows(offsets, options))


def prompts_for(workload: Workload, own: list[Prompt], count: int) -> list[Prompt]:
    """`count` prompts: the workload's own first; past them, more distinct ones where the workload
    can make them (`more_prompts`, e.g. synthetic prompts with further first tokens), else its
    prompts again, pass k with prompt ids suffixed `@k` so that every record stays its own."""
    if count <= len(own):
        return own[:count]
    if hasattr(workload, "more_prompts"):
        return own + workload.more_prompts(count - len(own))
    again = (replace(own[i % len(own)], prompt_id=f"{own[i % len(own)].prompt_id}@{i // len(own)}")
             for i in range(len(own), count))
    return own + list(again)
