"""Server-sent events over httpx: yields (arrival time, parsed JSON) per `data:` line."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from harness.engines.base import ConnectFailed, MalformedStream, RequestTimeout, ServerHTTPError, ServerUnreachable

DONE = object()  # sentinel yielded for `data: [DONE]`


async def post_sse(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> AsyncIterator[tuple[int, Any]]:
    """POST `body` and yield `(perf_counter_ns at arrival, payload)` for each SSE data line.

    The payload is the decoded JSON object, or DONE. Transport failures become one-line errors.
    """
    try:
        async with http.stream("POST", url, json=body) as resp:
            if resp.status_code >= 400:
                detail = (await resp.aread()).decode("utf-8", "replace").strip().replace("\n", " ")
                raise ServerHTTPError(f"{url} answered HTTP {resp.status_code}: {detail[:300]}")
            if "html" in resp.headers.get("content-type", ""):
                # A proxy's or gateway's error page, sent with a 200: not the stream asked for.
                raise MalformedStream(f"{url} answered with an HTML page, not an event stream")
            async for line in resp.aiter_lines():
                now = time.perf_counter_ns()
                if not line.startswith("data:"):
                    continue  # blank separators, comments, event: lines
                data = line[5:].strip()
                if data == "[DONE]":
                    yield now, DONE
                    continue
                try:
                    payload = json.loads(data)
                except json.JSONDecodeError as exc:
                    raise MalformedStream(f"{url} sent a chunk that is not JSON: {data[:120]!r}") from exc
                if not isinstance(payload, dict):
                    raise MalformedStream(f"{url} sent a chunk that is not a JSON object: {data[:120]!r}")
                yield now, payload
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectFailed(f"cannot connect to {url} ({type(exc).__name__}: {exc})") from exc
    except httpx.TimeoutException as exc:
        raise RequestTimeout(f"{url} sent no data within the read timeout ({type(exc).__name__})") from exc
    except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
        raise ServerUnreachable(f"{url} stopped answering ({type(exc).__name__}: {exc})") from exc
