"""A server's error text is kept to its first MAX_ERROR_CHARS characters, redacted before the cut: a
secret the server echoed across the cut leaves no unmasked head in the recorded message (cut
first, the head is no remembered form of the secret and nothing masks it)."""

from __future__ import annotations

import asyncio

import pytest

from harness.engines import llamacpp, openai, sse
from harness.engines.base import MAX_ERROR_CHARS, ServerHTTPError, StreamResult
from harness.engines.sglang_stream import ChunkReader
from harness.engines.wire import EventStreamReader
from harness.secrets import MASK, MIN_SECRET_CHARS, remember

SECRET = "sk-" + "QzvKwrTalpMenoBuxGidHefYacS"
URL = "http://127.0.0.1:9/generate"


def _across_the_cut(prefix: str = "") -> str:
    """An error text whose echoed secret starts a few characters before the cut."""
    return "x" * (MAX_ERROR_CHARS - len(prefix) - len(SECRET) // 2) + SECRET


def _result() -> StreamResult:
    return StreamResult(sent_unix_s=0.0, sent_ns=0)


def _http_status(text: str) -> None:
    body = text.encode()
    conn = sse._Connection()
    conn.reader = EventStreamReader()
    conn.reader.feed(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    asyncio.run(sse._head(conn, URL))


RAISERS = {
    "HTTP error body": _http_status,
    "llama.cpp error chunk": lambda text: llamacpp.absorb_chunk(_result(), {"error": {"message": text}}, 0),
    "OpenAI error chunk": lambda text: openai._absorb_chunk(_result(), {"error": {"message": text}}, 0),
    "SGLang error chunk": lambda text: ChunkReader().absorb(_result(), {"error": text}, 0),
}


@pytest.mark.parametrize("where", RAISERS)
def test_a_secret_echoed_across_the_cut_leaves_no_part_in_the_message(where):
    remember(SECRET)
    with pytest.raises(ServerHTTPError) as caught:
        RAISERS[where](_across_the_cut())
    message = _result().fail(caught.value, 0).error_message
    heads = {SECRET[i:i + MIN_SECRET_CHARS] for i in range(len(SECRET) - MIN_SECRET_CHARS + 1)}
    assert not [head for head in heads if head in message], message
    assert MASK in message  # the secret was in the kept part, masked there
