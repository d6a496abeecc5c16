"""A request's deadlines end it when its tokens stop, without a timer set per token: tokens only
stamp their arrival, and the timer reads the last stamp when its limit comes."""

from __future__ import annotations

import asyncio
import time

from harness.engines.base import StreamResult
from harness.engines.sse import DONE
from harness.engines.stream import Deadlines, collect

IDLE_S = 0.3  # against a stall of an hour: no scheduling delay decides the stalled stream's end
# A healthy stream's gaps are 25 ms against an idle limit of 1.5 s: only a 1.5 s stall of the whole
# test process could pass for a silent server.
STEADY_IDLE_S = 1.5


def absorb(result: StreamResult, count: int, now: int) -> None:
    result.stamp_tokens(count, now)


async def tokens(count: int, gap_s: float, then_stall: bool = False):
    """`count` chunks of one token each, `gap_s` apart, then [DONE] (or silence)."""
    for number in range(1, count + 1):
        await asyncio.sleep(gap_s)
        yield time.perf_counter_ns(), number
    if then_stall:
        await asyncio.sleep(3600)
    yield time.perf_counter_ns(), DONE


def collected(events, deadlines: Deadlines) -> tuple[StreamResult, int]:
    """The result of `collect` over `events`, and how many timers were set other than the stream's
    own sleeps."""
    async def main() -> tuple[StreamResult, int]:
        loop, timers = asyncio.get_running_loop(), []
        call_at = loop.call_at

        def counted(when, callback, *args, **kwargs):
            if getattr(callback, "__name__", "") != "_set_result_unless_cancelled":  # asyncio.sleep's
                timers.append(callback)
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counted
        result = StreamResult(sent_unix_s=time.time(), sent_ns=time.perf_counter_ns())
        return await collect(events, result, absorb, "http://fake/generate", deadlines), len(timers)

    return asyncio.run(main())


def test_a_stream_that_keeps_bringing_tokens_outlives_its_idle_limit_without_a_timer_per_token():
    # 120 tokens 25 ms apart: 3 s in all, twice the idle limit, never silent for as long as it.
    result, timers = collected(tokens(120, 0.025), Deadlines.for_request(120, idle_s=STEADY_IDLE_S))
    assert result.error_kind is None and len(result.chunk_ns) == 120
    lasted_s = (result.end_ns - result.sent_ns) / 1e9  # the stream's own stamps: longer on a slow host
    assert lasted_s > STEADY_IDLE_S
    # One timer per idle limit that came and found tokens since (and one for the start), however
    # long the host made the stream: never one per token.
    assert timers <= lasted_s / STEADY_IDLE_S + 2 and timers < 120 / 10


def test_a_stream_whose_tokens_stop_ends_at_its_idle_limit_with_what_arrived():
    result, timers = collected(tokens(12, 0.0, then_stall=True), Deadlines.for_request(12, idle_s=IDLE_S))
    assert result.error_kind == "timeout" and f"no new token within {IDLE_S:g} s" in result.error_message
    assert len(result.chunk_ns) == 12 and timers <= 3

