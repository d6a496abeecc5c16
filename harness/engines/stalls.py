"""The client's own scheduling delay, stamped beside each request it sends.

A chunk is stamped when the client's event loop gets to it. When the host is busy and the client
process waits for a core, or its loop is busy with other streams, every stamp taken then is late
by that wait, and a healthy stream can look held back. A probe task asks the loop to wake it every
PERIOD_NS and stamps how late each wake-up was; a wake-up later than STALL_NS is a stall, and every
request in flight at that moment keeps it (`StallProbe.watch`). A chunk that waited for the loop
through a stall is stamped in the same loop turn as the probe's late wake-up, so the stall's
lateness is within PERIOD_NS of the chunk's own delay. The integrity rules take the longest stall a
request saw as part of their noise floor (`harness.metrics.integrity`): measured on the run's host,
not assumed. The probe costs one timer wake-up per PERIOD_NS (about 0.2% of a core).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PERIOD_NS = 5_000_000
# uvloop's timers have a resolution of 1 ms: a wake-up up to this late is the timer, not a stall.
STALL_NS = 2_000_000


@dataclass
class Stalls:
    """The stalls one request saw: when the loop woke late (perf_counter ns) and by how much (ns)."""

    at_ns: list[int] = field(default_factory=list)
    late_ns: list[int] = field(default_factory=list)


class StallProbe:
    """Wakes every PERIOD_NS on the running loop and gives each stall to the requests in flight."""

    def __init__(self) -> None:
        self._watching: dict[int, Stalls] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start probing on the running loop (once)."""
        if self._task is None:  # due from now: a stall before the task first runs is seen too
            self._task = asyncio.get_running_loop().create_task(self._probe(time.perf_counter_ns() + PERIOD_NS))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @contextmanager
    def watch(self) -> Iterator[Stalls | None]:
        """The stalls seen while the block runs; None when the probe is not running (not measured)."""
        if self._task is None:
            yield None
            return
        stalls = Stalls()
        self._watching[id(stalls)] = stalls
        try:
            yield stalls
        finally:
            del self._watching[id(stalls)]

    async def _probe(self, due: int) -> None:
        while True:
            await asyncio.sleep(max(0, due - time.perf_counter_ns()) / 1e9)
            now = time.perf_counter_ns()
            if now - due > STALL_NS:
                for stalls in self._watching.values():
                    stalls.at_ns.append(now)
                    stalls.late_ns.append(now - due)
            due = now + PERIOD_NS
