"""A Session whose connections are answered in memory by an httpx.MockTransport handler.

Test equipment only. The lean stream transport reads raw HTTP/1.1 bytes from a socket; here each
request written to a connection is parsed back into an `httpx.Request`, handed to the handler, and
its `httpx.Response` is played into the connection as chunked HTTP/1.1, one write per piece of the
response stream, so the real parser reads it. The control plane (`Session.get/post`) goes to the
same handler through httpx's MockTransport. A handler that raises drops the connection before an
answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from harness.engines.sse import Address, Session

Handler = Callable[[httpx.Request], httpx.Response]


class _Replay(asyncio.Transport):
    def __init__(self, handler: Handler, address: Address, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.handler, self.address, self.protocol = handler, address, protocol
        self.closed = False

    def write(self, data: bytes) -> None:
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        scheme, host, port = self.address
        request = httpx.Request(method, f"{scheme}://{host}:{port}{target}", headers=headers, content=body)
        asyncio.get_running_loop().create_task(self._answer(request))

    async def _answer(self, request: httpx.Request) -> None:
        try:
            await self._play(self.handler(request))
        except Exception:  # the server went away mid-request
            self.close()

    async def _play(self, response: httpx.Response) -> None:
        reason = response.reason_phrase or "OK"
        headers = "".join(f"{name}: {value}\r\n" for name, value in response.headers.items()
                          if name.lower() not in ("content-length", "transfer-encoding"))
        self._feed(f"HTTP/1.1 {response.status_code} {reason}\r\n{headers}transfer-encoding: chunked\r\n\r\n"
                   .encode("latin-1"))
        async for piece in response.stream:  # the body as the handler streams it
            if piece:
                await asyncio.sleep(0)
                self._feed(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self._feed(b"0\r\n\r\n")

    def _feed(self, data: bytes) -> None:
        if not self.closed:
            self.protocol.data_received(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.protocol.connection_lost(None)

    def is_closing(self) -> bool:
        return self.closed


def mock_session(handler: Handler, **options: Any) -> Session:
    """A Session answered by `handler` in memory, for streams and control requests alike."""

    async def opener(address: Address, protocol_factory):
        protocol = protocol_factory()
        transport = _Replay(handler, address, protocol)
        protocol.connection_made(transport)
        return transport, protocol

    control = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return Session(control=control, opener=opener, **options)
