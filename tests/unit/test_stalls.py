"""The client's stall probe (`harness.engines.stalls`): a loop kept from running is seen by every
request in flight, by at least the time it was kept, less one probe period."""

from __future__ import annotations

import asyncio
import time

from harness.engines.base import StreamResult
from harness.engines.sse import Session
from harness.engines.stalls import PERIOD_NS, StallProbe
from harness.run.processes import shifted

BLOCK_S = 0.2


async def block_the_loop() -> None:
    """Keep the loop from running for BLOCK_S (a callback that does not yield), then let it run."""
    time.sleep(BLOCK_S)
    await asyncio.sleep(2 * PERIOD_NS / 1e9)


def test_a_blocked_loop_is_a_stall_seen_by_every_request_in_flight():
    async def main():
        probe = StallProbe()
        probe.start()
        with probe.watch() as first, probe.watch() as second:
            await block_the_loop()
        with probe.watch() as after:
            pass
        await probe.stop()
        return first, second, after

    first, second, after = asyncio.run(main())
    assert max(first.late_ns) >= BLOCK_S * 1e9 - PERIOD_NS
    assert first == second and len(first.at_ns) == len(first.late_ns)
    assert after.at_ns == [] and after.late_ns == []  # a stall is kept only by requests in flight


def test_a_probe_that_does_not_run_measures_nothing():
    async def main():
        probe = StallProbe()
        with probe.watch() as stalls:
            await block_the_loop()
        return stalls

    assert asyncio.run(main()) is None


def test_a_session_stamps_its_stalls_on_each_result_only_while_entered():
    async def send() -> StreamResult:
        await block_the_loop()
        return StreamResult(sent_unix_s=0.0, sent_ns=0)

    async def main():
        outside = await Session().watched(send())
        async with Session() as http:
            inside = await http.watched(send())
        return outside, inside

    outside, inside = asyncio.run(main())
    assert outside.stall_ns is None and outside.stall_late_ns is None
    assert max(inside.stall_late_ns) >= BLOCK_S * 1e9 - PERIOD_NS


def test_a_workers_stalls_move_onto_the_parents_clock():
    result = StreamResult(sent_unix_s=0.0, sent_ns=100, stall_ns=[150, 170], stall_late_ns=[5, 7])
    moved = shifted(result, 1_000)
    assert moved.stall_ns == [1_150, 1_170] and moved.stall_late_ns == [5, 7]
    assert shifted(StreamResult(sent_unix_s=0.0, sent_ns=100), 1_000).stall_ns is None
