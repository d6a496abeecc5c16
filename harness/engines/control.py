"""Control-plane requests (detection, facts, counters, cache flushes, health) with a total deadline.

httpx limits each read, not the request: a server that trickles a byte every few seconds keeps a
request alive for as long as it likes. Every control-plane request here ends at its deadline
whatever the server sends, as a `httpx.TimeoutException` that callers already handle. The
synchronous facade runs the asynchronous client on a private loop, because only a task can be
cancelled mid-read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from contextlib import aclosing
from typing import Any, TypeVar

import httpx

CONTROL_DEADLINE_S = 60.0  # a fact, a counter scrape or a cache flush; none takes a minute
CONNECT_TIMEOUT_S = 5.0
# The largest control-plane answer, as inflated: a server's facts or a /metrics page is KBs to a
# few MB, and a compressed answer (1 MB of gzip can inflate to 1 GiB) is read only this far.
MAX_ANSWER_BYTES = 16 * 2**20
T = TypeVar("T")


class DeadlineExceeded(httpx.TimeoutException):
    """The whole request took longer than its deadline."""


class AnswerTooLarge(httpx.DecodingError):
    """The answer (as inflated, when it came compressed) is larger than MAX_ANSWER_BYTES."""


def _grown(body: bytearray, piece: bytes, url: str, limit: int | None = None) -> None:
    """Append `piece` to `body`, or AnswerTooLarge once the body would pass `limit` bytes
    (MAX_ANSWER_BYTES by default; pieces are inflated one network read at a time, so no more than
    one read's worth is held past the limit)."""
    limit = MAX_ANSWER_BYTES if limit is None else limit
    if len(body) + len(piece) > limit:
        raise AnswerTooLarge(f"{url} answered more than {limit / 2**20:g} MiB (inflated)")
    body += piece


async def bounded_request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """`client.request`, its body read only up to MAX_ANSWER_BYTES: the answer with its body
    inflated (no content-encoding left), or AnswerTooLarge."""
    async with client.stream(method, url, **kwargs) as resp, aclosing(resp.aiter_bytes()) as pieces:
        body = bytearray()
        async for piece in pieces:  # closed here when the limit stops it, not later by the collector
            _grown(body, piece, url)
    headers = [(name, value) for name, value in resp.headers.multi_items()
               if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(resp.status_code, headers=headers, content=bytes(body), request=resp.request,
                          extensions=resp.extensions)


async def within(deadline_s: float, url: str, call: Awaitable[T]) -> T:
    """`call`, or DeadlineExceeded once `deadline_s` have passed."""
    try:
        async with asyncio.timeout(deadline_s):
            return await call
    except TimeoutError:
        raise DeadlineExceeded(f"{url} gave no complete answer within {deadline_s:g} s") from None


class BoundedClient:
    """The `get` / `post` of an `httpx.Client`, each request ended at `deadline_s` (a context manager)."""

    def __init__(self, deadline_s: float = CONTROL_DEADLINE_S, headers: dict[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.deadline_s = deadline_s
        self._loop = asyncio.new_event_loop()
        timeout = httpx.Timeout(deadline_s, connect=min(CONNECT_TIMEOUT_S, deadline_s))
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers, transport=transport)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self._request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self._request("POST", url, **kwargs)

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        task = self._loop.create_task(within(self.deadline_s, url, bounded_request(self._client, method, url, **kwargs)))
        # A Ctrl-C inside the request leaves this loop before the task ends; the task's exception is
        # taken when it does end, so it is not reported on stderr as one never retrieved.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return self._loop.run_until_complete(task)

    def close(self) -> None:
        """Close the client, then let what a stopped request left on the loop (an answer's byte
        iterators, their closing tasks) finish, so the loop ends with nothing pending: a task
        destroyed while pending is a line on stderr."""
        loop = self._loop
        loop.run_until_complete(self._client.aclose())
        pending = asyncio.all_tasks(loop)
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def __enter__(self) -> BoundedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def get_within(http: httpx.Client, url: str, deadline_s: float, max_bytes: int | None = None) -> tuple[int, str]:
    """GET `url` with a synchronous client, for callers already on a running event loop (where
    `BoundedClient` cannot run its own): (status, text), or DeadlineExceeded once the body has
    taken longer than `deadline_s`, or AnswerTooLarge past `max_bytes` (default MAX_ANSWER_BYTES).
    Checked as each piece arrives, so a trickle ends at most one read timeout past the deadline."""
    ends = time.monotonic() + deadline_s
    with http.stream("GET", url) as resp:
        body = bytearray()
        for piece in resp.iter_bytes():
            _grown(body, piece, url, max_bytes)
            if time.monotonic() > ends:
                raise DeadlineExceeded(f"{url} gave no complete answer within {deadline_s:g} s")
        return resp.status_code, body.decode(resp.encoding or "utf-8", errors="replace")
