"""The result every client returns, and the errors it raises.

Times are `time.perf_counter_ns()` readings (monotonic, for durations); `sent_unix_s` is wall-clock
time only to place the request in the calendar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from harness.errors import SparkbenchError
from harness.spec import Prompt

# Marks a result whose chunk_tokens were counted one per text-bearing chunk, because the server
# sent no running usage; readers must not take those counts as the server's.
ASSUMED_ONE_PER_CHUNK = "assumed_one_per_chunk"


@dataclass
class StreamResult:
    """Raw facts of one streamed request, as observed by the client."""

    sent_unix_s: float
    sent_ns: int
    end_ns: int = 0
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    # One entry per chunk that brought new tokens: arrival time and the server's token count so far.
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # final meta_info / usage, kept raw
    # Counts as the server reported them (never re-tokenized or counted from chunks).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    stream_mode: str = "unknown"  # cumulative | incremental | unknown (a single chunk proves neither)


class Backend(Protocol):
    """What the runner and the guard need from a client of one server API."""

    name: str  # the API it speaks
    engine: str  # the engine of the server it talks to (whose meta objects it returns)

    async def send(self, http: httpx.AsyncClient, base_url: str, prompt: Prompt) -> StreamResult: ...

    def snapshot(self, http: httpx.Client, base_url: str) -> dict[str, Any]: ...

    async def counters(self, http: httpx.AsyncClient, base_url: str) -> dict[str, float] | None: ...

    async def flush_prefix_cache(self, http: httpx.AsyncClient, base_url: str) -> str: ...


class ServerUnreachable(SparkbenchError):
    """The server did not answer at all (connection refused, reset, timed out)."""


class ServerHTTPError(SparkbenchError):
    """The server answered with a non-2xx status."""


class MalformedStream(SparkbenchError):
    """The server's stream broke the protocol (bad JSON, no terminating [DONE])."""


def answers_json(http: httpx.Client, url: str) -> bool:
    """True when `url` answers 200 with a JSON body (how adapters recognise their engine)."""
    resp = http.get(url)
    if resp.status_code != 200:
        return False
    try:
        resp.json()
    except ValueError:
        return False
    return True
