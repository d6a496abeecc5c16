"""A fast local stream server: SGLang's native `/generate` stream from pre-built chunks at a set rate.

Test equipment for the client's own benchmark (`tests.bench_client`), not a model of a server. It
runs in its own process (so its CPU is not the client's) on one asyncio loop. Every chunk's bytes,
HTTP chunk framing included, are built once per stream length; one timer per tick writes, for every
stream in flight, the chunks that have come due at `rate` chunks per second each. Both SGLang forms:
incremental (one id per chunk) and cumulative (all ids and text so far in every chunk).
`GET /metrics` answers a fixed Prometheus text the size of SGLang's (`METRICS_TEXT`), so that a
scraper beside the client does the work it would do against a real server.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

TICK_S = 0.001
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")
END = b"0\r\n\r\n"


# About the size and shape of SGLang 0.5.23's /metrics: gauges, counters and histograms.
METRICS_TEXT = "".join(
    [f'# TYPE sglang:{name} gauge\nsglang:{name}{{model_name="tiny",tp_rank="0"}} 1.0\n'
     for name in ("num_running_reqs", "num_queue_reqs", "token_usage", "gen_throughput", "cache_hit_rate",
                  "num_retracted_reqs", "spec_accept_length")]
    + ['sglang:generation_tokens_total{model_name="tiny"} 12345.0\n']
    + [f'sglang:{hist}_bucket{{le="{le}",model_name="tiny"}} 3.0\n'
       for hist in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "inter_token_latency_seconds",
                    "queue_time_seconds") for le in [*(f"{0.001 * 2 ** i:g}" for i in range(40)), "+Inf"]]).encode()


def _framed(line: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(line), line)


@lru_cache(maxsize=8)
def chunks(tokens: int, cumulative: bool) -> tuple[bytes, ...]:
    """Every chunk of a `tokens`-long answer, framed; the last one carries [DONE] and the end."""
    out = []
    for n in range(1, tokens + 1):
        ids = list(range(1000, 1000 + n)) if cumulative else [1000 + n - 1]
        meta = {"id": "f" * 32, "finish_reason": {"type": "length", "length": tokens} if n == tokens else None,
                "prompt_tokens": 8, "completion_tokens": n, "cached_tokens": 0}
        line = b"data: " + json.dumps({"text": "ab " * (n if cumulative else 1), "output_ids": ids,
                                       "meta_info": meta}, separators=(",", ":")).encode() + b"\n\n"
        out.append(_framed(line))
    out[-1] += _framed(b"data: [DONE]\n\n") + END
    return tuple(out)


class _Stream(asyncio.Protocol):
    def __init__(self, server: _Server) -> None:
        self.server, self.buffer = server, bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        if head.startswith(b"get /metrics"):
            del self.buffer[:end + 4]
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(METRICS_TEXT), METRICS_TEXT))
            return
        length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
        if len(self.buffer) < end + 4 + length:
            return
        body = json.loads(bytes(self.buffer[end + 4:end + 4 + length]))
        del self.buffer[:end + 4 + length]
        self.transport.write(HEAD)
        tokens = body["sampling_params"]["max_new_tokens"]
        self.server.start(self.transport, chunks(tokens, self.server.cumulative))


class _Server:
    """Streams in flight, each `[transport, chunks, sent, started]`, served by one ticker."""

    def __init__(self, rate: float, cumulative: bool) -> None:
        self.rate, self.cumulative = rate, cumulative
        self.streams: list[list] = []

    def start(self, transport: asyncio.Transport, parts: tuple[bytes, ...]) -> None:
        self.streams.append([transport, parts, 0, asyncio.get_running_loop().time()])

    async def tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            for stream in self.streams:
                transport, parts, sent, started = stream
                due = min(len(parts), int((now - started) * self.rate) + 1)
                if due > sent and not transport.is_closing():
                    transport.write(b"".join(parts[sent:due]))
                    stream[2] = due
            self.streams = [s for s in self.streams if s[2] < len(s[1]) and not s[0].is_closing()]


def _serve(sock: socket.socket, rate: float, cumulative: bool) -> None:
    async def main() -> None:
        server = _Server(rate, cumulative)
        listener = await asyncio.get_running_loop().create_server(lambda: _Stream(server), sock=sock)
        async with listener:
            await server.tick()

    asyncio.run(main())


@contextmanager
def fast_server(rate: float, cumulative: bool = False, workers: int = 1) -> Iterator[str]:
    """Serve on a free loopback port in `workers` child processes that share the listening socket
    (each accepts its own connections, so many client processes need not share one server loop);
    yield the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_serve, args=(sock, rate, cumulative), daemon=True) for _ in range(workers)]
    for process in processes:
        process.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        for process in processes:
            process.terminate()
            process.join()
        sock.close()
