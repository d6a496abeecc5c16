"""A recording pass-through proxy on loopback: what the harness really sent, as the server received it.

Test equipment only: each POST body is kept, then the request is forwarded to the real server and
its streamed answer relayed chunk by chunk, or line by line through a rewrite made afresh for each
POST from its headers (a planted fault: `corrupt_token`, `edit_chunks`, `split_data`, each one or
only the n-th POST's: `nth_post`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Rewrite = Callable[[str], str]  # one line of the answer -> the line relayed
Rewriting = Callable[[dict[str, str]], Rewrite]  # a POST's headers (names lower-case) -> its answer's rewrite
ChunkEdit = Callable[[dict[str, Any], int, dict[str, str]], dict[str, Any]]  # (chunk, its index, headers) -> chunk


def corrupt_token(position: int) -> Rewriting:
    """A llama.cpp stream whose output token at `position` (0-based) is replaced by the next id: the
    defect of a server that corrupts a token after verification."""
    def make(_headers: dict[str, str]) -> Rewrite:
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


def edit_chunks(edit: ChunkEdit) -> Rewriting:
    """Each JSON chunk of the answer replaced by `edit(chunk, its 0-based index, the POST's headers)`."""
    def make(headers: dict[str, str]) -> Rewrite:
        index = itertools.count()

        def rewrite(line: str) -> str:
            if not line.startswith("data: {"):
                return line
            return "data: " + json.dumps(edit(json.loads(line[len("data: "):]), next(index), headers))

        return rewrite

    return make


def split_data(_headers: dict[str, str]) -> Rewrite:
    """Every `data:` line cut after its first comma into two `data:` lines of one event, as SSE
    allows (the reader joins them with a newline, which JSON reads as a space)."""
    return _split_line


def _split_line(line: str) -> str:
    head, comma, tail = line.partition(",")
    return f"{head},\ndata: {tail}" if line.startswith("data: {") and comma else line


def nth_post(n: int, rewriting: Rewriting) -> Rewriting:
    """`rewriting` for the n-th POST (0-based) only; the others relayed as they came."""
    posts = itertools.count()
    return lambda headers: rewriting(headers) if next(posts) == n else _unchanged


def _unchanged(line: str) -> str:
    return line


def _handler(target: str, bodies: list[dict], requests: list[tuple[str, str, dict[str, str]]],
             rewriting: Rewriting | None):
    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self, method: str, body: bytes | None) -> None:
            sent = {name.lower(): value for name, value in self.headers.items()}
            requests.append((method, self.path, sent))
            headers = {"content-type": self.headers.get("content-type", "application/json")}
            with httpx.stream(method, target + self.path, content=body, headers=headers, timeout=600) as resp:
                self.send_response(resp.status_code)
                self.send_header("content-type", resp.headers.get("content-type", "application/json"))
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                rewrite = rewriting(sent) if rewriting and method == "POST" else None
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
                    rewriting: Rewriting | None = None) -> Iterator[tuple[str, list[dict]]]:
    """Yield (proxy base URL, list that fills with every POSTed JSON body); `requests`, when given,
    fills with (method, path, headers) of every request, GETs included; `rewriting` makes each
    POST's line rewrite from its headers."""
    bodies: list[dict] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(target, bodies, [] if requests is None else requests, rewriting))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
