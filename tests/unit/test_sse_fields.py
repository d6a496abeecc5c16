"""The SSE reader follows the specification's field rules (WHATWG HTML, "Server-sent events"): the
`data` lines of one event are joined with "\\n", comments and `event`, `id`, `retry` or unknown
fields are skipped, one leading byte-order mark is dropped, lines end in LF, CRLF or CR, and a
blank line ends the event. Example cases, then a property test over streams drawn with every
rule at once, however the reads split them."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engines.base import MalformedStream
from harness.engines.openai import stream
from harness.engines.wire import BOM, MAX_EVENT_BYTES, EventStreamReader
from tests.fakes.replay import mock_session

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"  # a body read until close


def events_of(body: bytes, parts: int = 1) -> list[bytes]:
    """The events the reader makes of `body` (after a read-until-close head), fed in `parts` reads."""
    reader, answer = EventStreamReader(), HEAD + body
    step = max(1, len(answer) // parts)
    events = [event for at in range(0, len(answer), step) for event in reader.feed(answer[at:at + step])]
    return events + reader.eof()


@pytest.mark.parametrize(("body", "expected"), [
    (b'data: {"a":\ndata: 1}\n\n', [b'{"a":\n1}']),  # one event's data over two lines
    (b"data: a\ndata:\ndata: b\n\n", [b"a\n\nb"]),  # an empty data line is an empty line of the data
    (b": keep-alive\nevent: message\nid: 7\nretry: 5000\nfoo: bar\ndata: x\n\n", [b"x"]),
    (b"data:x\n\ndata\n\n", [b"x", b""]),  # no space after the colon; a field name alone
    (b"dataset: 1\ndata: y\n\n", [b"y"]),  # a field whose name only starts with "data"
    (BOM + b"data: z\n\n", [b"z"]),
    (b"data: a\r\rdata: b\r\n\r\ndata: c\n\n", [b"a", b"b", b"c"]),  # CR, CRLF and LF line ends
    (b"event: ping\n\n: only a comment\n\n", []),  # events without data are no events
    (b"data: [DONE]\n", [b"[DONE]"]),  # the stream's end also ends its last event
])
def test_each_field_rule_of_the_specification(body, expected):
    assert events_of(body) == expected
    assert events_of(body, parts=len(body) + len(HEAD)) == expected  # one byte per read


def test_a_chunk_split_over_data_lines_is_read_whole_through_the_client():
    lines = (b'data: {"choices": [{"text": "ab",\ndata:  "finish_reason": null}],\n'
             b'data: "usage": {"completion_tokens": 1}}\n\n'
             b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}\n\ndata: [DONE]\n\n')

    async def main():
        http = mock_session(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                                           content=BOM + lines))
        async with http:
            return await stream(http, "http://server", {}, "/v1/completions")

    result = asyncio.run(main())
    assert result.error_kind is None, result.error_message
    assert (result.text, result.chunk_tokens, result.prompt_tokens) == ("ab", [1], 3)


# A value is any text without a line end; noise is every line that is not a data field.
values = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)
noise = st.one_of(values.map(lambda text: ":" + text), st.sampled_from(["event: update", "id: 42", "id",
                                                                      "retry: 3000", "retry: x", "foo: bar",
                                                                      "dataset: 1", "Data: upper", " data: 1"]))
events = st.lists(st.lists(st.tuples(st.lists(noise, max_size=2), values), min_size=1, max_size=4), max_size=5)
endings = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw) -> tuple[bytes, list[bytes]]:
    """A body of events drawn with comments and other fields between their data lines, line ends of
    any kind, maybe a byte-order mark; and the data the specification makes of each event."""
    lines: list[bytes] = []
    expected: list[bytes] = []
    for event in draw(events):
        data = []
        for extra, value in event:
            lines += [line.encode() for line in extra]
            field = draw(st.sampled_from([" ", ""])) + value
            lines.append(b"data:" + field.encode())
            data.append(field.removeprefix(" ").encode())  # one space after the colon is dropped
        lines.append(b"")
        expected.append(b"\n".join(data).strip())
        lines += [line.encode() for line in draw(st.lists(noise, max_size=1))] + [b""] * draw(st.integers(0, 1))
    body, previous = bytearray(draw(st.sampled_from([b"", BOM]))), b""
    for line in lines:
        ending = draw(endings)
        if previous == b"\r" and not line and ending.startswith(b"\n"):
            ending = b"\r"  # CR then an empty line's LF would be one CRLF: one line end, not two
        body += line + ending
        previous = ending
    return bytes(body), expected


@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=streams(), cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10))
def test_any_stream_under_the_field_rules_gives_each_events_joined_data(drawn, cuts):
    body, expected = drawn
    answer = HEAD + body
    points = sorted({min(cut, len(answer)) for cut in cuts} | {0, len(answer)})
    reader, seen = EventStreamReader(), []
    for start, end in zip(points, points[1:]):
        seen += reader.feed(answer[start:end])
    assert seen + reader.eof() == expected



# A bound on what one stream makes the reader hold: a line or an event's data past MAX_EVENT_BYTES
# is refused (MalformedStream: a `malformed_chunk` record), however the reads split it.

READ = 1024 * 1024


def test_a_line_never_ended_is_refused_once_past_the_bound():
    reader = EventStreamReader()
    reader.feed(HEAD + b"data: ")
    with pytest.raises(MalformedStream, match="a line of more than 8 MiB"):
        for _ in range(MAX_EVENT_BYTES // READ + 1):  # one read past the bound, never more
            reader.feed(b"x" * READ)


@pytest.mark.parametrize("parts", [1, 64])
def test_an_event_of_many_short_data_lines_past_the_bound_is_refused(parts):
    line = b"data: " + b"x" * 1000 + b"\n"
    with pytest.raises(MalformedStream, match="an event's data of more than 8 MiB"):
        events_of(line * (MAX_EVENT_BYTES // 1000 + 1) + b"\n", parts)


@pytest.mark.parametrize("parts", [1, 64])
def test_a_line_at_the_bound_is_read_whole(parts):
    value = b"x" * (MAX_EVENT_BYTES - len(b"data: "))
    assert events_of(b"data: " + value + b"\n\n", parts) == [value]


def test_an_event_past_the_bound_is_a_malformed_chunk_record():
    lines = b"data: " + b"x" * MAX_EVENT_BYTES + b"\n\ndata: [DONE]\n\n"

    async def main():
        http = mock_session(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                                           content=lines))
        async with http:
            return await stream(http, "http://server", {}, "/v1/completions")

    result = asyncio.run(main())
    assert result.error_kind == "malformed_chunk" and "more than 8 MiB" in result.error_message
