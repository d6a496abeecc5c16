"""The scripted stream server, keeping what each request brought: its path, headers and body.

Test equipment only. `recording(Script(...))` serves like `stream_server.serving` and yields the
base URL and the list it appends `(method, path, headers, body)` to (body None for a GET).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.stream_server import Script, _Handler, threaded


class _Recording(_Handler):
    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, dict(self.headers), None))
        super().do_GET()

    def _stream(self, body: dict[str, Any], arrived: float) -> None:
        self.server.seen.append(("POST", self.path, dict(self.headers), body))
        super()._stream(body, arrived)


@contextmanager
def recording(script: Script) -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], Any]]]]:
    handler = type("RecordingHandler", (_Recording,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.seen = []
    with threaded(server) as url:
        yield url, server.seen
