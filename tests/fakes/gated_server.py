"""The scripted stream server behind a gateway that wants a header of its own.

Test equipment only. `gated(Script(...), name, value)` serves like `stream_server.serving` every
request that carries `name: value` and answers 401 to any other, as an authenticating gateway in
front of an engine does; it yields the base URL and the list it appends each refused path to.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

from tests.fakes.stream_server import Script, _Handler, threaded


class _Gated(_Handler):
    def do_GET(self) -> None:
        if self._admitted():
            super().do_GET()

    def do_POST(self) -> None:
        if self._admitted():
            super().do_POST()

    def _admitted(self) -> bool:
        name, value = self.server.gate
        if self.headers.get(name) == value:
            return True
        self.rfile.read(int(self.headers.get("content-length") or 0))  # the connection stays usable
        self.server.refused.append(self.path)
        self._json(401, {"error": {"message": f"missing {name}"}})
        return False


@contextmanager
def gated(script: Script, name: str, value: str) -> Iterator[tuple[str, list[str]]]:
    handler = type("GatedHandler", (_Gated,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.gate, server.refused = (name, value), []
    with threaded(server) as url:
        yield url, server.refused
