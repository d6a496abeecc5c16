"""The SSE reader under arbitrary byte splits, truncations and garbage: it never crashes, never
invents an event, and never loses a complete one. Splits fall between HTTP chunks (through the
whole client) and anywhere in the raw bytes of the answer, framing included (the parser alone)."""

from __future__ import annotations

import asyncio
import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engines.base import RequestFailed
from harness.engines.sse import DONE, post_sse
from harness.engines.wire import EventStreamReader
from tests.fakes.replay import mock_session

# Drawing the examples, not reading them, is most of the cost (about 4 ms each here): 2,000
# splits, each with up to 12 cuts, reach every boundary of these short streams many times over.
EXAMPLES = 2_000
objects = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8), st.none()), max_size=3)
comments = st.sampled_from([": keep-alive\n\n", "event: message\n", "\n", "id: 7\n"])


class Chunks(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self):
        for part in self.parts:
            yield part


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(body)) for cut in cuts} | {0, len(body)})
    return [body[a:b] for a, b in zip(points, points[1:])]


class OneBody:
    """One client for every example (making a client costs more than reading a stream): each
    example sets the parts the next response streams, each part one HTTP chunk."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self.http = mock_session(lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Chunks(self.parts)))

    def events(self, parts: list[bytes]) -> tuple[list, Exception | None]:
        self.parts[:] = parts
        return self.loop.run_until_complete(self._read())

    async def _read(self) -> tuple[list, Exception | None]:
        events: list = []
        try:
            async for _, payload in post_sse(self.http, "http://server/generate", {}):
                events.append(payload)
        except RequestFailed as exc:
            return events, exc
        return events, None


SERVER = OneBody()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(objects, max_size=6), noise=st.lists(comments, max_size=3),
       cuts=st.lists(st.integers(min_value=0, max_value=2_000), max_size=12), crlf=st.booleans())
def test_any_split_of_a_valid_stream_gives_every_event_in_order(events, noise, cuts, crlf):
    lines = "".join(noise) + "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    body = (lines.replace("\n", "\r\n") if crlf else lines).encode()
    seen, error = SERVER.events(split(body, cuts))
    assert error is None
    assert seen == [*events, DONE]


@settings(max_examples=EXAMPLES // 5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(objects, min_size=1, max_size=5), keep=st.integers(min_value=0, max_value=500),
       garbage=st.binary(max_size=40), cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8))
def test_truncated_or_garbled_streams_fail_as_a_request_never_a_crash(events, keep, garbage, cuts):
    complete = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    body = complete[:keep] + garbage
    seen, _ = SERVER.events(split(body, cuts))
    whole_before_cut = complete[:keep].count(b"\n\n")  # events complete before the garbage begins
    assert seen[:whole_before_cut] == events[:whole_before_cut]
    assert all(item is DONE or isinstance(item, dict) for item in seen)  # nothing but objects is an event


@settings(max_examples=EXAMPLES // 5, deadline=None)
@given(events=st.lists(objects, max_size=6), noise=st.lists(comments, max_size=3),
       sizes=st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=6),
       cuts=st.lists(st.integers(min_value=0, max_value=3_000), max_size=16))
def test_any_split_of_the_raw_answer_gives_every_data_line_in_order(events, noise, sizes, cuts):
    lines = ("".join(noise) + "".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events)).encode()
    pieces, at = [], 0
    while at < len(lines):  # HTTP chunks of the given sizes, in turn
        size = sizes[len(pieces) % len(sizes)]
        pieces.append(b"%x;ext=1\r\n%s\r\n" % (len(lines[at:at + size]), lines[at:at + size]))
        at += size
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"".join(pieces) + b"0\r\n\r\n"
    reader, seen = EventStreamReader(), []
    for part in split(answer, cuts):
        seen += reader.feed(part)
    assert reader.complete and reader.reusable
    assert [json.loads(payload) for payload in seen] == events
