"""The result every client returns, and the errors it raises.

Times are `time.perf_counter_ns()` readings (monotonic, for durations); `sent_unix_s` is wall-clock
time only to place the request in the calendar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from harness.errors import SparkbenchError
from harness.secrets import redact
from harness.spec import Prompt

if TYPE_CHECKING:
    from harness.engines.sse import Session

# Marks a result whose chunk_tokens were counted one per text-bearing chunk, because the server
# sent no running usage; readers must not take those counts as the server's.
ASSUMED_ONE_PER_CHUNK = "assumed_one_per_chunk"
MAX_ERROR_CHARS = 300  # of a server's error text (a body, an error chunk), the start kept in the message


def error_excerpt(text: str) -> str:
    """The start of a server's error text, fit for a message: redacted before it is cut, since a
    cut through an echoed secret leaves a head that no remembered form of it matches."""
    return redact(text)[:MAX_ERROR_CHARS]


@dataclass
class StreamResult:
    """Raw facts of one streamed request, as observed by the client."""

    sent_unix_s: float
    sent_ns: int
    end_ns: int = 0
    # Open loop: when the request was due by the arrival schedule (stamped by the dispatcher, not
    # the client); None in a closed loop, where a request is due when the one before it ends.
    scheduled_ns: int | None = None
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    # One entry per chunk that brought new tokens: arrival time and the server's token count so far.
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    text: str = ""
    # Thinking a reasoning parser streamed apart from the answer (`reasoning_content`/`reasoning`).
    reasoning_text: str = ""
    # One entry per chunk that brought answer text: arrival time and the length of `text` after it
    # (where a `<think>` block left inline in the text ends, the answer's first arrival is found).
    text_ns: list[int] = field(default_factory=list)
    text_chars: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    # The client loop's stalls while the request ran (`harness.engines.stalls`): when the loop woke
    # late and by how much, ns. None: not measured (no probe ran).
    stall_ns: list[int] | None = None
    stall_late_ns: list[int] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # final meta_info / usage, kept raw
    # Counts as the server reported them (never re-tokenized or counted from chunks).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    stream_mode: str = "unknown"  # cumulative | incremental | unknown (a single chunk proves neither)
    received_bytes: int = 0  # bytes of the `data:` payloads received: a token count cannot exceed it
    # Set when the request failed: what went wrong (one of ERROR_KINDS) and the one-line reason.
    # The times and tokens above are whatever arrived before the failure.
    error_kind: str | None = None
    error_message: str | None = None

    @property
    def tokens_so_far(self) -> int:
        """The server's running token count at the last chunk that brought tokens (0 before any)."""
        return self.chunk_tokens[-1] if self.chunk_tokens else 0

    def stamp_tokens(self, count: int, now: int) -> None:
        """A chunk arrived at `now` (perf_counter ns) with the server's running count `count`: kept
        as a token arrival only if it brought new tokens. A count that is not a number (`"5"`) is a
        chunk that breaks the protocol."""
        if isinstance(count, bool) or not isinstance(count, (int, float)):
            raise MalformedStream(f"a token count that is not a number: {str(count)[:40]!r}")
        if count <= self.tokens_so_far:
            return
        if self.first_token_ns is None:
            self.first_token_ns = now
        self.last_token_ns = now
        self.chunk_ns.append(now)
        self.chunk_tokens.append(count)

    def note_text(self, text: str, now: int) -> None:
        """Append answer text that arrived at `now` (perf_counter ns), stamped with its offset."""
        if text:
            self.text += text
            self.text_ns.append(now)
            self.text_chars.append(len(self.text))

    def fail(self, error: RequestFailed, now: int) -> StreamResult:
        """Mark the result failed at `now` (perf_counter ns) with `error`'s kind and message (redacted:
        it names URLs, and may quote a server that echoed the credentials it was sent)."""
        self.error_kind, self.error_message, self.end_ns = error.kind, redact(str(error)), now
        return self

    def raise_for_error(self) -> StreamResult:
        """The result itself when the request succeeded; else raise its error (for callers such as
        the guard's canary, for which one failed request means the check cannot be made)."""
        if self.error_kind is not None:
            raise ERROR_TYPES.get(self.error_kind, RequestFailed)(self.error_message or self.error_kind)
        return self


class Backend(Protocol):
    """What the runner and the guard need from a client of one server API."""

    name: str  # the API it speaks
    engine: str  # the engine of the server it talks to (whose meta objects it returns)

    async def send(self, http: Session, base_url: str, prompt: Prompt) -> StreamResult: ...

    def body(self, prompt: Prompt) -> dict[str, Any]:
        """The request body `send` streams for `prompt` (before a run's extra body is merged in)."""

    def snapshot(self, http: httpx.Client, base_url: str) -> dict[str, Any]: ...

    async def counters(self, http: Session, base_url: str) -> dict[str, float] | None: ...

    async def flush_prefix_cache(self, http: Session, base_url: str) -> str: ...


class RequestFailed(SparkbenchError):
    """One request failed; `kind` names how (ERROR_KINDS), and it is recorded as such."""

    kind = "failed"


class ServerUnreachable(RequestFailed):
    """The server did not answer at all (connection refused, reset mid-stream)."""

    kind = "disconnected"


class ConnectFailed(ServerUnreachable):
    """The connection was refused or could not be made: the request was never sent."""

    kind = "connect_failed"


class ServerHTTPError(RequestFailed):
    """The server answered with a non-2xx status, or reported an error inside the stream."""

    kind = "http_status"


class ServerRedirect(ServerHTTPError):
    """The server answered with a redirect (3xx): redirects are not followed, since a stream sent
    elsewhere would measure another server; the request is not the one asked."""

    kind = "redirect"


class MalformedStream(RequestFailed):
    """The server's stream broke the protocol (bad JSON, a chunk without the fields it must carry)."""

    kind = "malformed_chunk"


class StreamIncomplete(RequestFailed):
    """The stream ended without its terminating `[DONE]`."""

    kind = "no_done"


class RequestTimeout(RequestFailed):
    """No token-bearing data within the idle timeout, or the whole request past its deadline."""

    kind = "timeout"


class FirstTokenTimeout(RequestFailed):
    """No first token within the first-token deadline."""

    kind = "first_token_timeout"


ERROR_TYPES: dict[str, type[RequestFailed]] = {cls.kind: cls for cls in (
    ServerUnreachable, ConnectFailed, ServerHTTPError, ServerRedirect, MalformedStream, StreamIncomplete,
    RequestTimeout, FirstTokenTimeout)}
# Every kind a failed request's record can carry: the client's failures, then the outcomes the
# record itself judges (`harness.records.requests.outcome`). A never-sent request is not recorded.
ERROR_KINDS = (*(kind for kind in ERROR_TYPES if kind != ConnectFailed.kind), "aborted", "no_tokens",
               "short_output", "impossible_count")


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
