"""Server-sent events over a lean HTTP/1.1 transport: yields (arrival time, payload) per `data:` line.

The hot loop of a run is one socket read per streamed chunk. httpx spends several layers and an
event-loop hand-off per chunk on it (httpcore, anyio, h11); here an asyncio Protocol feeds each read
straight into a small incremental parser (`harness.engines.wire`) and stamps `perf_counter_ns()`
first thing in `data_received`, the callback the event loop makes when the socket has data: every
event completed by that read carries that stamp. Chunks are decoded with msgspec. Keep-alive
connections are pooled per server, one per request in flight. httpx stays for the control plane
(`Session.get` / `Session.post`: facts, counters, flushes).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import unquote

import httpx
import msgspec

from harness.engines.base import (
    ConnectFailed,
    MalformedStream,
    RequestTimeout,
    ServerHTTPError,
    ServerRedirect,
    ServerUnreachable,
    StreamResult,
    error_excerpt,
)
from harness.engines.control import CONTROL_DEADLINE_S, bounded_request, within
from harness.engines.shaping import with_extra_body
from harness.engines.stalls import StallProbe
from harness.engines.wire import EventStreamReader

DONE = object()  # sentinel yielded for `data: [DONE]`
DONE_BYTES = b"[DONE]"
CONNECT_TIMEOUT_S = 10.0
_ANY = msgspec.json.Decoder()
T = TypeVar("T")
Decode = Callable[[str, bytes], Any]
Address = tuple[str, str, int]  # scheme, host, port
Opener = Callable[[Address, Callable[[], asyncio.Protocol]], Awaitable[Any]]


def run_streams(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on uvloop where it is installed (libuv's loop costs less than half of asyncio's
    per socket wake-up, which is the floor of the per-chunk cost: `tests.bench_client`), else on
    asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def json_object(url: str, raw: bytes) -> dict[str, Any]:
    """One chunk's JSON object, or MalformedStream (also for JSON nested past the parser's depth,
    and for the NaN and Infinity literals, which are not JSON)."""
    try:
        payload = _ANY.decode(raw)
    except RecursionError as exc:
        raise MalformedStream(f"{url} sent a chunk nested deeper than the parser takes: {raw[:120]!r}") from exc
    except msgspec.DecodeError as exc:
        payload = _with_lone_surrogates(raw)
        if payload is None:
            raise MalformedStream(f"{url} sent a chunk that is not JSON: {raw[:120]!r}") from exc
    if not isinstance(payload, dict):
        raise MalformedStream(f"{url} sent a chunk that is not a JSON object: {raw[:120]!r}")
    return payload


def _with_lone_surrogates(raw: bytes) -> Any:
    """`raw` decoded as JSON that escapes a lone surrogate (`"\\ud800"`: valid JSON, which msgspec
    refuses), each one replaced by U+FFFD; None when it is not JSON at all (Python's reader takes
    NaN and Infinity, which JSON has not)."""
    try:
        text = json.loads(raw, parse_constant=_not_json)
        dumped = json.dumps(text, ensure_ascii=False)  # UTF-16 keeps each lone surrogate one code unit
        return msgspec.json.decode(dumped.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    except (ValueError, RecursionError, msgspec.DecodeError):
        return None


def _not_json(literal: str) -> Any:
    raise ValueError(f"{literal} is not a JSON value")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; it reads one response at a time into its event queue."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reader: EventStreamReader | None = None
        self.events: deque[tuple[int, bytes]] = deque()
        self.waiter: asyncio.Future | None = None
        self.error: Exception | None = None
        self.closed = False
        self.last_ns = 0
        self.when_complete: Callable[[], None] | None = None  # back to the pool once the body ended

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()  # once: asking for it on every read costs a getpid() call

    def data_received(self, data: bytes) -> None:
        now = self.last_ns = time.perf_counter_ns()
        reader = self.reader
        if reader is None:  # nothing asked: not a connection to reuse
            self.transport.close()
            return
        try:
            for payload in reader.feed(data):
                self.events.append((now, payload))
        except MalformedStream as exc:
            self.error = exc
            self.transport.close()
        if reader.complete and self.when_complete is not None:
            self.when_complete()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.reader is not None and self.error is None:
            now = time.perf_counter_ns()
            self.events.extend((now, payload) for payload in self.reader.eof())
        self._wake()

    def fail(self, error: Exception) -> None:
        self.error = self.error or error
        self.transport.close()
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next read, the end of the connection or an error."""
        self.waiter = self.loop.create_future()
        await self.waiter


class Session:
    """How clients talk to one or more servers: pooled lean connections for event streams, and an
    httpx client for everything else. `read_timeout_s`: longest silence inside a stream (None: none);
    `extra_body`: the engine's own fields merged into every streamed request (`harness.engines.shaping`)."""

    def __init__(self, headers: dict[str, str] | None = None, read_timeout_s: float | None = None,
                 control: httpx.AsyncClient | None = None, opener: Opener | None = None,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.headers = dict(headers or {})
        self.extra_body = extra_body
        self.read_timeout_s = read_timeout_s
        self._control = control  # made on first use: an httpx client costs tens of ms of CPU to make
        self._idle: dict[Address, list[_Connection]] = {}
        self._open: set[_Connection] = set()  # every connection made, closed with the session
        self._opener = opener or _open_socket  # another opener: in-memory servers for tests
        self.stalls = StallProbe()  # probing from `async with` on: the client's own scheduling delay

    @property
    def control(self) -> httpx.AsyncClient:
        if self._control is None:
            self._control = httpx.AsyncClient(timeout=httpx.Timeout(self.read_timeout_s, connect=CONNECT_TIMEOUT_S),
                                              headers=self.headers)
        return self._control

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        """A control-plane GET, ended at its total deadline (`harness.engines.control`)."""
        return await within(CONTROL_DEADLINE_S, url, bounded_request(self.control, "GET", url, **kwargs))

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        """A control-plane POST, ended at its total deadline."""
        return await within(CONTROL_DEADLINE_S, url, bounded_request(self.control, "POST", url, **kwargs))

    async def __aenter__(self) -> Session:
        self.stalls.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def watched(self, request: Awaitable[StreamResult]) -> StreamResult:
        """`request`'s result with the stalls of the client's loop while it ran (none recorded when
        the session was not entered: not measured)."""
        with self.stalls.watch() as stalls:
            result = await request
        if stalls is not None:
            result.stall_ns, result.stall_late_ns = stalls.at_ns, stalls.late_ns
        return result

    async def aclose(self) -> None:
        await self.stalls.stop()
        for conn in self._open:
            conn.transport.close()
        self._open.clear()
        self._idle.clear()
        if self._control is not None:
            await self._control.aclose()

    async def connect(self, address: Address, fresh: bool = False) -> tuple[_Connection, bool]:
        """(an idle connection to `address`, True), else (a new one, False); ConnectFailed when it
        cannot be made. `fresh`: a new one in any case."""
        idle = self._idle.get(address, [])
        while idle and not fresh:
            conn = idle.pop()
            if not conn.closed:
                return conn, True
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _, conn = await self._opener(address, _Connection)
        except (OSError, TimeoutError) as exc:
            scheme, host, port = address
            raise ConnectFailed(f"cannot connect to {scheme}://{host}:{port} ({type(exc).__name__}: {exc})") from exc
        self._open.add(conn)
        return conn, False

    def release(self, address: Address, conn: _Connection, reuse: bool) -> None:
        """Keep `conn` for the next request once its response has ended (when `reuse`); else close it."""
        reader = conn.reader
        if not reuse or conn.closed or conn.error is not None or reader is None or not reader.reusable:
            conn.transport.close()
            self._open.discard(conn)
            return

        def park() -> None:
            conn.reader, conn.when_complete = None, None
            conn.events.clear()
            self._idle.setdefault(address, []).append(conn)

        if reader.complete:
            park()
        else:
            conn.when_complete = park  # the end of the body ([DONE] comes just before it) is on its way

    def request_bytes(self, url: httpx.URL, body: bytes) -> bytes:
        headers = {"Host": url.netloc.decode("ascii"), "Accept": "text/event-stream",
                   "Content-Type": "application/json", "Content-Length": str(len(body)), **self.headers}
        if url.userinfo:  # `user:password@` in the server URL: basic auth, as httpx does
            credentials = unquote(url.userinfo.decode("ascii")).encode("utf-8")
            headers.setdefault("Authorization", "Basic " + base64.b64encode(credentials).decode("ascii"))
        head = f"POST {url.raw_path.decode('ascii')} HTTP/1.1\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        return head.encode("latin-1") + body


async def _open_socket(address: Address, protocol: Callable[[], asyncio.Protocol]) -> Any:
    scheme, host, port = address
    secure = ssl.create_default_context() if scheme == "https" else None
    return await asyncio.get_running_loop().create_connection(protocol, host, port, ssl=secure)


async def post_sse(http: Session, url: str, body: dict[str, Any], decode: Decode = json_object,
                   tally: StreamResult | None = None) -> AsyncIterator[tuple[int, Any]]:
    """POST `body` and yield `(perf_counter_ns at arrival, payload)` for each SSE data line.

    The payload is `decode(url, raw bytes)` (default: the JSON object), or DONE. The size of every
    payload is added to `tally.received_bytes`: what a server's token counts are checked against. Transport failures
    become one-line errors; ConnectFailed means the request was never sent. The connection is kept
    for the next request only when the stream ended cleanly (or its reader stopped after [DONE]).
    """
    parsed = httpx.URL(url)
    address = (parsed.scheme, parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    request = http.request_bytes(parsed, msgspec.json.encode(with_extra_body(body, http.extra_body)))
    conn, reuse = await _answered(http, address, request, url), False
    watchdog = _Watchdog(conn, url, http.read_timeout_s)
    try:
        while True:
            while conn.events:
                now, raw = conn.events.popleft()
                if tally is not None:
                    tally.received_bytes += len(raw)
                yield now, (DONE if raw == DONE_BYTES else decode(url, raw))
            if conn.error is not None:
                raise conn.error
            if conn.reader.complete:
                reuse = True
                return
            if conn.closed:
                raise ServerUnreachable(f"{url} stopped answering (connection closed mid-stream)")
            await conn.wait()
    except GeneratorExit:  # the reader stopped (at [DONE], or on a chunk it refused): framing intact
        reuse = True
        raise
    finally:
        watchdog.cancel()
        http.release(address, conn, reuse)


async def _answered(http: Session, address: Address, request: bytes, url: str) -> _Connection:
    """Send `request` and wait for the answer's head. A kept-alive connection that the server had
    closed meanwhile answers nothing at all: the request goes once more on a new connection."""
    conn, reused = await http.connect(address)
    while True:
        conn.reader = EventStreamReader()
        conn.transport.write(request)
        try:
            await _head(conn, url)
            return conn
        except _NoAnswer as exc:
            http.release(address, conn, reuse=False)
            if not reused:
                raise ServerUnreachable(f"{url} stopped answering (connection closed before an answer)") from exc
            conn, reused = await http.connect(address, fresh=True)
        except BaseException:
            http.release(address, conn, reuse=False)
            raise


class _NoAnswer(Exception):
    """The connection closed before a single byte of the answer."""


async def _head(conn: _Connection, url: str) -> None:
    """Wait for the status and headers; an error status or an HTML page is a failed request."""
    reader = conn.reader
    while reader.status is None and conn.error is None and not conn.closed:
        await conn.wait()
    if conn.error is not None:
        raise conn.error
    if reader.status is None:
        raise _NoAnswer
    if reader.status >= 400:
        while not (reader.complete or conn.closed or conn.error):
            await conn.wait()
        detail = bytes(reader.error_body).decode("utf-8", "replace").strip().replace("\n", " ")
        raise ServerHTTPError(f"{url} answered HTTP {reader.status}: {error_excerpt(detail)}")
    if 300 <= reader.status < 400:
        where = reader.headers.get("location", "nowhere named")
        raise ServerRedirect(f"{url} answered HTTP {reader.status}, a redirect to {where[:200]} (not followed: "
                             "give --server the address it names)")
    encoding = reader.headers.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity"):  # none was asked for, and a compressed stream cannot be read
        raise MalformedStream(f"{url} answered with unsupported content-encoding {encoding!r}")
    if "html" in reader.headers.get("content-type", ""):
        # A proxy's or gateway's error page, sent with a 200: not the stream asked for.
        raise MalformedStream(f"{url} answered with an HTML page, not an event stream")


class _Watchdog:
    """Fails the stream after `timeout_s` without any byte; checked lazily, not per chunk."""

    def __init__(self, conn: _Connection, url: str, timeout_s: float | None) -> None:
        self.conn, self.url, self.timeout_s = conn, url, timeout_s
        self.handle = asyncio.get_running_loop().call_later(timeout_s, self._check) if timeout_s else None
        conn.last_ns = time.perf_counter_ns()

    def _check(self) -> None:
        silent_s = (time.perf_counter_ns() - self.conn.last_ns) / 1e9
        if silent_s >= self.timeout_s:
            self.conn.fail(RequestTimeout(f"{self.url} sent no data within the read timeout ({self.timeout_s:g} s)"))
        else:
            self.handle = asyncio.get_running_loop().call_later(self.timeout_s - silent_s, self._check)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
