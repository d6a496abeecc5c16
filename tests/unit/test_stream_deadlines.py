"""A request's deadlines end it when its tokens stop, without a timer set per token: tokens only
stamp their arrival, and the timer reads the last stamp when its limit comes."""

from __future__ import annotations

import asyncio
import time

from harness.engines.base import StreamResult
from harness.engines.sse import DONE
from harness.engines.stream import Deadlines, collect

IDLE_S = 0.3


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
    # 30 tokens 20 ms apart: 0.6 s in all, twice the idle limit, never silent for as long as it.
    result, timers = collected(tokens(30, 0.02), Deadlines.for_request(30, idle_s=IDLE_S))
    assert result.error_kind is None and len(result.chunk_ns) == 30
    assert timers <= 4  # one per idle limit that came and found tokens since: not one per token


def test_a_stream_whose_tokens_stop_ends_at_its_idle_limit_with_what_arrived():
    result, timers = collected(tokens(12, 0.0, then_stall=True), Deadlines.for_request(12, idle_s=IDLE_S))
    assert result.error_kind == "timeout" and f"no new token within {IDLE_S:g} s" in result.error_message
    assert len(result.chunk_ns) == 12 and timers <= 3

