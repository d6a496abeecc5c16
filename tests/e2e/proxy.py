"""A recording pass-through proxy on loopback: what the harness really sent, as the server received it.

Test equipment only: each POST body is kept, then the request is forwarded to the real server and
its streamed answer relayed chunk by chunk, or line by line through a rewrite made afresh for each
request (a planted fault: `corrupt_token`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

Rewrite = Callable[[str], str]  # one line of the answer -> the line relayed


def corrupt_token(position: int) -> Callable[[], Rewrite]:
    """A llama.cpp stream whose output token at `position` (0-based) is replaced by the next id: the
    defect of a server that corrupts a token after verification."""
    def make() -> Rewrite:
        seen = 0

        def rewrite(line: str) -> str:
            nonlocal seen
            if not line.startswith("data: {"):
                return line
            chunk = json.loads(line[len("data: "):])
            ids = chunk.get("tokens") or []
            if seen <= position < seen + len(ids):
                ids[position - seen] += 1
            seen += len(ids)
            return "data: " + json.dumps(chunk)

        return rewrite

    return make


def _handler(target: str, bodies: list[dict], requests: list[tuple[str, str, dict[str, str]]],
             rewriting: Callable[[], Rewrite] | None):
    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self, method: str, body: bytes | None) -> None:
            requests.append((method, self.path, {name.lower(): value for name, value in self.headers.items()}))
            headers = {"content-type": self.headers.get("content-type", "application/json")}
            with httpx.stream(method, target + self.path, content=body, headers=headers, timeout=600) as resp:
                self.send_response(resp.status_code)
                self.send_header("content-type", resp.headers.get("content-type", "application/json"))
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                rewrite = rewriting() if rewriting else None
                pieces = resp.iter_raw() if rewrite is None else (
                    (rewrite(line) + "\n").encode() for line in resp.iter_lines())
                for piece in pieces:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            self._relay("GET", None)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            bodies.append(json.loads(body))
            self._relay("POST", body)

        def log_message(self, *args) -> None:
            pass

    return Relay


@contextmanager
def recording_proxy(target: str, requests: list | None = None,
                    rewriting: Callable[[], Rewrite] | None = None) -> Iterator[tuple[str, list[dict]]]:
    """Yield (proxy base URL, list that fills with every POSTed JSON body); `requests`, when given,
    fills with (method, path, headers) of every request, GETs included; `rewriting` makes each
    POST's line rewrite."""
    bodies: list[dict] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(target, bodies, [] if requests is None else requests, rewriting))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
