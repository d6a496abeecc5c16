"""The scripted stream server as a careless gateway: it echoes the credentials it was sent.

Test equipment only. `echoing(Script(...))` serves like `stream_server.serving`, and echoes every
credential-bearing header value it receives (`Authorization` and each `X-...` header), whole and
the part after its first space alone (the TOKEN of `Bearer TOKEN`), in every place a server can:

- its facts (`/server_info`, `/model_info`, `/v1/models`) and its `/metrics` labels;
- the streamed answer's text (prefixed to every cumulative SGLang text; the first OpenAI choice)
  and its meta object;
- by the arrival index of the stream request, modulo 4: 1, a `401` whose JSON error body and
  `www-authenticate` header hold the echo; 2, a `data:` line that is no JSON and holds the echo;
  3, a mid-stream error object that holds it. 0 streams normally (with the echo in its text).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.stream_server import MAX_MODEL_LEN, MODEL, Script, _Handler, threaded


def _echo(headers) -> str:
    """Every credential-bearing header value as received, whole and after its first space."""
    values = [value for name, value in headers.items() if name.lower() == "authorization" or name.lower().startswith("x-")]
    return " | ".join(f"{value} ; {value.partition(' ')[2]}" for value in values)


class _EchoHandler(_Handler):
    arrivals: Iterator[int]
    _mode = 0

    def do_GET(self) -> None:
        echo = _echo(self.headers)
        if self.path == "/metrics":
            label = echo.replace("\\", "\\\\").replace('"', '\\"')
            data = (f'# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{echo="{label}"}} 1.0\n'
                    f'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{echo="{label}"}} 1.0\n')
            self._answer(200, data.encode(), "text/plain; version=0.0.4")
            return
        models = {"object": "list", "data": [{"id": MODEL, "root": "/fake", "owned_by": echo,
                                              "max_model_len": MAX_MODEL_LEN}]}
        routes = {"/health": {}, "/v1/models": models, "/version": {"version": "fake", "echo": echo}}
        if self.script.api == "sglang":
            routes |= {"/server_info": {"version": "fake", "echo": echo, echo: "a key"},
                       "/model_info": {"model_path": "/fake", "echo": echo}}
        self._json(200, routes[self.path]) if self.path in routes else self._json(404, {"detail": echo})

    def _answer(self, status: int, data: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self._mode = next(self.arrivals) % 4
        if self._mode == 1:
            self.rfile.read(int(self.headers["content-length"]))
            echo = _echo(self.headers)
            body = json.dumps({"error": {"message": f"invalid token {echo}"}}).encode()
            self._answer(401, body, "application/json", {"www-authenticate": f'Bearer error="{echo}"'})
            return
        super().do_POST()

    def _event(self, payload: Any) -> None:
        echo = _echo(self.headers)
        if isinstance(payload, dict) and self._mode in (2, 3):
            line = f"invalid token {echo}" if self._mode == 2 else json.dumps({"error": {"message": f"bad {echo}"}})
            data = f"data: {line}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n")
            self.close_connection = True
            raise _Sent
        if isinstance(payload, dict):
            _with_echo(payload, echo)
        super()._event(payload)

    def _stream(self, body: dict[str, Any], arrived: float) -> None:
        try:
            super()._stream(body, arrived)
        except _Sent:
            pass


class _Sent(Exception):
    """The echoing line has been sent and the stream ended."""


def _with_echo(chunk: dict[str, Any], echo: str) -> None:
    """The echo in the chunk's text (SGLang's cumulative text: as its prefix, every chunk) and meta."""
    if "text" in chunk and "meta_info" in chunk:
        chunk["text"] = f"{echo} {chunk['text']}"
        chunk["meta_info"]["echo"] = echo
    for choice in chunk.get("choices") or []:
        if choice.get("text"):
            choice["text"] = f"{echo} {choice['text']}"
        if (choice.get("delta") or {}).get("content"):
            choice["delta"]["content"] = f"{echo} {choice['delta']['content']}"
    if "usage" in chunk:
        chunk["metrics"] = {**chunk.get("metrics", {}), "echo": echo}


@contextmanager
def echoing(script: Script) -> Iterator[str]:
    """Serve `script`, echoing every credential it is sent, on a free loopback port; yield the base URL."""
    handler = type("EchoHandler", (_EchoHandler,), {"script": script, "arrivals": itertools.count()})
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url
