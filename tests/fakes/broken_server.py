"""The scripted stream server, broken on purpose: each way real servers and networks fail a stream.

Test equipment only. `breaking(Breakage(kind, requests))` serves like `stream_server.serving`, but
the requests whose arrival index is in `requests` (all when None) fail as `kind` says:

- `truncated_json`: a `data:` line whose JSON is cut off, then the stream ends;
- `no_done`: every token, but no `data: [DONE]`;
- `disconnect`: the connection is dropped after a few chunks;
- `http_503`: `503 Service Unavailable` with a JSON error body;
- `html_200`: `200` with a proxy's HTML error page;
- `keepalive`: SSE comment lines (`: keep-alive`) every 50 ms and never a token;
- `short`: a normal stream with half the tokens asked for;
- `lying_count`: a normal stream whose last chunk claims LIE_TOKENS completion tokens;
- `echo_key`: `401` whose error body echoes the Authorization header it was sent;
- `gzip`: `200` with a gzip-compressed event stream (`content-encoding: gzip`), never asked for;
- `redirect_307`: `307 Temporary Redirect` to another address, with no body;
- `text_count`: a normal stream whose token counts are sent as strings (`"3"`);
- `deep_json`, `nan_json`: a `data:` line the JSON parser cannot take (nested DEEP_NESTING deep;
  a `NaN` literal, which Python's reader takes and JSON has not), then the stream ends;
- `huge_field`: a normal stream whose final meta object carries HUGE_FIELD_CHARS of letters and digits
  in one word (SGLang's `meta_info`, OpenAI's `metrics`), as a server that attaches a trace would;
- `trickle`: every GET (facts, models, metrics) answers one byte every TRICKLE_GAP_S, for TRICKLE_FOR_S;
- `held`: the stream's headers, then nothing until the client hangs up (at most HELD_FOR_S): a run
  whose next request is held stays in flight for as long as a test needs, at any host speed.
"""

from __future__ import annotations

import gzip
import itertools
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.stream_server import Script, _Handler, threaded

NONE = "none"  # a breakage that breaks nothing: the plain scripted server
BREAKAGES = ("truncated_json", "no_done", "disconnect", "http_503", "html_200", "keepalive", "short",
             "lying_count", "echo_key", "gzip", "deep_json", "nan_json", "redirect_307",
             "text_count")
LIE_TOKENS = 10**9
TRICKLE_GAP_S, TRICKLE_FOR_S = 0.2, 20.0
CHUNKS_BEFORE_BREAK = 3
KEEPALIVE_FOR_S = 30.0
HELD = "held"
HELD_FOR_S = 300.0
DEEP_NESTING = 10_000
HUGE_FIELD_CHARS = 2 * 2**20
HUGE_WORD = "a1" * (HUGE_FIELD_CHARS // 2)  # one word of letters and digits, the adversarial shape for redaction
UNPARSABLE_LINES = {"deep_json": b'data: {"meta_info": ' + b"[" * DEEP_NESTING + b"]" * DEEP_NESTING + b"}\n\n",
                    "nan_json": b'data: {"text": "ab", "meta_info": {"completion_tokens": NaN}}\n\n'}


@dataclass(frozen=True)
class Breakage:
    kind: str
    requests: frozenset[int] | None = None  # arrival indices (from 0) that break; None: every request

    def applies(self, index: int) -> bool:
        return self.requests is None or index in self.requests


class _Stop(Exception):
    """Ends the handler's stream early (the breakage has been delivered)."""


class _BrokenHandler(_Handler):
    breakage: Breakage
    arrivals: Iterator[int]
    received: list[dict[str, Any]]  # path and Authorization header of every POST, for the tests
    _kind: str | None = None
    _events = 0

    def do_POST(self) -> None:
        self.received.append({"path": self.path, "authorization": self.headers.get("authorization")})
        self._kind = self.breakage.kind if self.breakage.applies(next(self.arrivals)) else None
        self._events = 0
        if self._kind in ("http_503", "html_200", "keepalive", "echo_key", "gzip", "redirect_307", HELD):
            self.rfile.read(int(self.headers["content-length"]))
            getattr(self, f"_{self._kind}")()
            return
        try:
            super().do_POST()
        except (_Stop, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        if self.breakage.kind != "trickle":
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(int(TRICKLE_FOR_S / TRICKLE_GAP_S)))
        self.end_headers()
        try:
            for _ in range(int(TRICKLE_FOR_S / TRICKLE_GAP_S)):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(TRICKLE_GAP_S)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stream(self, body: dict[str, Any], arrived: float) -> None:
        if self._kind == "short":
            for sampling in (body.get("sampling_params") or {}, body):
                for key in ("max_new_tokens", "max_tokens"):
                    if key in sampling:
                        sampling[key] //= 2
        super()._stream(body, arrived)

    def _event(self, payload: Any) -> None:
        self._events += 1
        if self._kind == "no_done" and payload == "[DONE]":
            return
        if self._kind == "truncated_json" and self._events > CHUNKS_BEFORE_BREAK:
            self._last_line(b'data: {"text": "ab", "output_ids": [1, \n\n')
        if self._kind in UNPARSABLE_LINES and self._events > CHUNKS_BEFORE_BREAK:
            self._last_line(UNPARSABLE_LINES[self._kind])
        if self._kind == "disconnect" and self._events > CHUNKS_BEFORE_BREAK:
            self.connection.shutdown(socket.SHUT_RDWR)
            raise _Stop
        if self._kind == "lying_count" and isinstance(payload, dict):
            _lie(payload)
        if self._kind == "text_count" and isinstance(payload, dict):
            _counts_as_text(payload)
        if self._kind == "huge_field" and isinstance(payload, dict):
            _with_huge_field(payload)
        super()._event(payload)

    def _last_line(self, line: bytes) -> None:
        """Send `line` as the stream's last chunk and end it."""
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n0\r\n\r\n")
        raise _Stop

    def _gzip(self) -> None:
        body = gzip.compress(b'data: {"text": "ab", "meta_info": {}}\n\ndata: [DONE]\n\n')
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect_307(self) -> None:
        self.send_response(307)
        self.send_header("location", "http://127.0.0.1:1/generate")
        self.send_header("content-length", "0")
        self.end_headers()

    def _echo_key(self) -> None:
        self._json(401, {"error": {"message": f"invalid credentials: {self.headers.get('authorization')}"}})

    def _held(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self.connection.settimeout(HELD_FOR_S)
        try:
            self.connection.recv(1)  # returns once the client hangs up (or says anything more)
        except OSError:
            pass
        self.close_connection = True

    def _http_503(self) -> None:
        self._json(503, {"error": {"message": "Service Unavailable", "code": 503}})

    def _html_200(self) -> None:
        page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def _keepalive(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        ends = time.monotonic() + KEEPALIVE_FOR_S
        try:
            while time.monotonic() < ends:
                self.wfile.write(b"e\r\n: keep-alive\n\n\r\n")
                self.wfile.flush()
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def _lie(chunk: dict[str, Any]) -> None:
    """Claim LIE_TOKENS in the chunk that carries the final counts (SGLang's last, OpenAI's usage)."""
    meta = chunk.get("meta_info") or {}
    if meta.get("finish_reason"):
        meta["completion_tokens"] = LIE_TOKENS
    if chunk.get("choices") == [] and "usage" in chunk:
        chunk["usage"]["completion_tokens"] = LIE_TOKENS


def _with_huge_field(chunk: dict[str, Any]) -> None:
    """HUGE_WORD in the meta object of the chunk that carries the final counts (the record keeps it)."""
    meta = chunk.get("meta_info") or {}
    if meta.get("finish_reason"):
        meta["trace"] = HUGE_WORD
    if chunk.get("choices") == [] and "usage" in chunk:
        chunk.setdefault("metrics", {})["trace"] = HUGE_WORD


def _counts_as_text(chunk: dict[str, Any]) -> None:
    """Every token count of the chunk as a string, as a careless proxy might re-encode it."""
    for counts in (chunk.get("meta_info"), chunk.get("usage")):
        for key, value in (counts or {}).items():
            if key.endswith("_tokens") and isinstance(value, int):
                counts[key] = str(value)


@contextmanager
def breaking(breakage: Breakage, script: Script = Script(), received: list | None = None) -> Iterator[str]:
    """Serve `script`, broken as `breakage` says, on a free loopback port; yield the base URL.
    Each POST's path and Authorization header are appended to `received` when given."""
    handler = type("BrokenHandler", (_BrokenHandler,), {"script": script, "breakage": breakage,
                                                        "arrivals": itertools.count(),
                                                        "received": received if received is not None else []})
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url
