"""Folding a server's event stream into one request's result, within the request's deadlines.

Every API client hands its events and its chunk reader to `collect`, which owns what all streams
share: the end at `[DONE]`, the deadlines, and turning any failure into facts on the result (its
error kind and message, with the times and tokens that arrived before) instead of an exception,
so that a failed request is recorded like any other and the run goes on.

Deadlines count token progress, not bytes: SSE comment lines (`: keep-alive`) and chunks that bring
no token do not keep a request alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from harness.engines.base import (
    ConnectFailed,
    FirstTokenTimeout,
    MalformedStream,
    RequestFailed,
    RequestTimeout,
    StreamIncomplete,
    StreamResult,
)
from harness.engines.sse import DONE

# Default total deadline: a fixed allowance for queueing and prefill, then a floor decode rate.
# A request slower than this is broken, not slow: 2 tokens/s is far below any served model.
TOTAL_BASE_S = 600.0
FLOOR_DECODE_TOK_S = 2.0


@dataclass(frozen=True)
class Deadlines:
    """How long one request may take, in seconds (None: no such limit).

    idle_s: longest wait for the next token-bearing chunk (from the send for the first one);
    first_token_s: longest wait from the send to the first token;
    total_s: longest time from the send to `[DONE]`.
    """

    idle_s: float | None = None
    first_token_s: float | None = None
    total_s: float | None = None

    @classmethod
    def for_request(cls, max_new_tokens: int, idle_s: float | None, first_token_s: float | None = None,
                    total_s: float | None = None) -> Deadlines:
        """Deadlines of a request asking for `max_new_tokens`; total_s defaults to
        `TOTAL_BASE_S + max_new_tokens / FLOOR_DECODE_TOK_S`."""
        default_total = TOTAL_BASE_S + max_new_tokens / FLOOR_DECODE_TOK_S
        return cls(idle_s=idle_s, first_token_s=first_token_s, total_s=total_s or default_total)

    def due(self, start: float, last_progress: float, has_token: bool) -> tuple[float, type[RequestFailed]]:
        """(loop time when the request must give up, the error it then ends with)."""
        limits = [(start + self.total_s if self.total_s else math.inf, RequestTimeout),
                  (last_progress + self.idle_s if self.idle_s else math.inf, RequestTimeout)]
        if not has_token and self.first_token_s:
            limits.append((start + self.first_token_s, FirstTokenTimeout))
        return min(limits, key=lambda limit: limit[0])


Absorb = Callable[[StreamResult, Any, int], None]
# What a client's reading of a chunk of a shape it did not foresee raises (`_unforeseen`).
UNFORESEEN = (AttributeError, TypeError, KeyError, IndexError, ValueError)
NO_DEADLINES = Deadlines()


async def collect(events: AsyncIterator[tuple[int, Any]], result: StreamResult, absorb: Absorb,
                  url: str, deadlines: Deadlines = NO_DEADLINES) -> StreamResult:
    """Fold `(arrival ns, payload)` events into `result` with `absorb` until `[DONE]`.

    Returns the result; a failure (HTTP error, malformed chunk, disconnect, missing `[DONE]`, a
    deadline) ends it with `result.fail` rather than raising. Only `ConnectFailed` is raised: the
    request never reached the server.
    """
    loop = asyncio.get_running_loop()
    timer, watch = asyncio.timeout_at(None), _DeadlineWatch(deadlines, result)
    try:
        # aclosing: the stream's connection goes back to its pool as soon as [DONE] is read.
        async with timer, contextlib.aclosing(events):
            watch.arm(timer)
            async for now, payload in events:
                if payload is DONE:
                    result.end_ns = now
                    return result
                try:
                    absorb(result, payload, now)
                except UNFORESEEN as exc:
                    raise _unforeseen(url, exc) from exc
        raise StreamIncomplete(f"{url}: stream ended without [DONE]")
    except ConnectFailed:
        raise  # never sent: not a failed request, the caller decides whether to try again
    except (TimeoutError, RequestFailed) as caught:
        failure = caught
        # The transport may report our own deadline's cancellation as its read timeout.
        if timer.expired():
            failure = watch.error(f"{url}: gave up after {loop.time() - watch.start:.1f} s "
                                  f"({_which(watch.error, deadlines)})")
        if not isinstance(failure, RequestFailed):
            raise
        return result.fail(failure, time.perf_counter_ns())
    finally:
        watch.cancel()


def _unforeseen(url: str, exc: Exception) -> MalformedStream:
    """The clients read every field by its type; a chunk of a shape they still did not foresee is
    a malformed chunk of this request, never a traceback that ends the run."""
    return MalformedStream(f"{url}: a chunk of an unexpected shape ({type(exc).__name__}: {exc})")


class _DeadlineWatch:
    """Ends a request at its deadlines with no work per chunk: a timer set for the earliest limit,
    which, when it comes, reads the time of the last token from the result's own stamps and is set
    again if tokens came meanwhile (rescheduling it on every token would cost a timer per chunk)."""

    def __init__(self, deadlines: Deadlines, result: StreamResult) -> None:
        self.loop = asyncio.get_running_loop()
        self.deadlines, self.result = deadlines, result
        self.start, self.start_ns = self.loop.time(), time.perf_counter_ns()
        self.error: type[RequestFailed] = RequestTimeout  # the limit that ends the request when due
        self.timer: asyncio.Timeout | None = None
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, timer: asyncio.Timeout) -> None:
        """Watch for `timer`, entered: it expires when the request is due to give up."""
        self.timer = timer
        self._check()

    def _check(self) -> None:
        last_ns = self.result.last_token_ns
        progress = self.start if last_ns is None else self.start + (last_ns - self.start_ns) / 1e9
        when, self.error = self.deadlines.due(self.start, progress, has_token=last_ns is not None)
        if math.isinf(when):
            return
        if when <= self.loop.time():
            self.timer.reschedule(when)  # in the past: the timer expires at once
        else:
            self.handle = self.loop.call_at(when, self._check)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


def _which(error: type[RequestFailed], deadlines: Deadlines) -> str:
    """Which limit ran out, in words."""
    if error is FirstTokenTimeout:
        return f"no first token within {deadlines.first_token_s:g} s"
    parts = [f"no new token within {deadlines.idle_s:g} s" if deadlines.idle_s else "",
             f"past the {deadlines.total_s:g} s request deadline" if deadlines.total_s else ""]
    return " or ".join(part for part in parts if part)
