"""The HTTP/1.1 answer parser under hostile bytes: whatever a server sends and however the reads
split it, the parser either gives the same events or fails with MalformedStream (a failed request
of kind `malformed_chunk`), never another exception; its limits hold on content, not on splits.

The fuzz runs FAST_EXAMPLES cases in the default run and SLOW_EXAMPLES in the `slow` tier
(`pytest -m slow tests/unit/test_wire_fuzz.py`)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engines.base import MalformedStream
from harness.engines.wire import MAX_CHUNK_SIZE_LINE, MAX_HEAD_BYTES, EventStreamReader

FAST_EXAMPLES = 400
SLOW_EXAMPLES = 10_000
# Digits of other scripts and superscripts: str.isdigit() takes them, int() does not.
ODD_DIGITS = "²³¹٣۵߂०১੫૭୮௯౦೪൬๗໘༣၅႒០᠑᥆᧐᪅᭐᮱᱂᱓꘠꣐꤁꧐꩐꯰０"
digits = st.text(alphabet="0123456789" + ODD_DIGITS, min_size=1, max_size=6)
hex_sizes = st.one_of(st.integers(min_value=0, max_value=300).map(lambda n: f"{n:x}"),
                      st.sampled_from(["-5", "0x10", "1_0", "+3", " 4", "²", "ffffffffffffffffff", ""]),
                      st.text(alphabet="0123456789abcdefABCDEF_x-+ ;" + ODD_DIGITS, max_size=8))
status_lines = st.one_of(st.sampled_from(["HTTP/1.1 200 OK", "HTTP/1.0 200", "HTTP/1.1 503 Busy", "HTTP/2 200",
                                          "HTTP/1.1 2²0 OK", "HTTP/1.1 ²00", "HTTP/1.1 20 OK", "ICY 200 OK"]),
                         digits.map(lambda code: f"HTTP/1.1 {code} OK"))
header_values = {
    "content-length": st.one_of(digits, st.integers(min_value=0, max_value=400).map(str)),
    "transfer-encoding": st.sampled_from(["chunked", "gzip, chunked", "identity", "CHUNKED"]),
    "connection": st.sampled_from(["close", "keep-alive"]),
    "content-type": st.sampled_from(["text/event-stream", "application/json"]),
    "x-pad": st.integers(min_value=0, max_value=MAX_HEAD_BYTES + 64).map(lambda n: "p" * n),
}
headers = st.lists(st.sampled_from(sorted(header_values)).flatmap(
    lambda name: header_values[name].map(lambda value: f"{name}: {value}")), max_size=4)
lines = st.lists(st.one_of(st.binary(max_size=30).map(lambda b: b"data: " + b), st.sampled_from(
    [b"data: [DONE]", b": keep-alive", b"", b"event: x", b"data:" + b"\xff" * 3])), max_size=6)


@st.composite
def answers(draw) -> bytes:
    """An answer shaped like HTTP: a status line, headers, and a chunked, sized or raw SSE body,
    its framing sometimes broken, sometimes with a byte flipped anywhere."""
    newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    body = b"".join(line + newline for line in draw(lines))
    if draw(st.booleans()):  # chunked, each chunk's size line drawn (mostly true)
        sizes = draw(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=5))
        pieces, at = [], 0
        while at < len(body):
            piece = body[at:at + sizes[len(pieces) % len(sizes)]]
            size = f"{len(piece):x}" if draw(st.integers(0, 9)) else draw(hex_sizes)
            pieces.append(size.encode("utf-8") + b"\r\n" + piece + b"\r\n")
            at += len(piece)
        body = b"".join(pieces) + b"0\r\n" + draw(st.sampled_from([b"", b"x-trailer: 1\r\n"])) + b"\r\n"
    # Headers are read as Latin-1, where the byte 0xb2 is "²": both encodings reach the parser.
    encoding = draw(st.sampled_from(["utf-8", "latin-1"]))
    head = "\r\n".join([draw(status_lines), *draw(headers)]).encode(encoding, "replace") + b"\r\n\r\n"
    answer = bytearray(head + body)
    if answer and draw(st.integers(0, 4)) == 0:
        answer[draw(st.integers(0, len(answer) - 1))] = draw(st.integers(0, 255))
    return bytes(answer)


def read(parts: list[bytes]) -> tuple:
    """Everything the parser makes of `parts` fed in turn, then the end of the connection:
    ("malformed",) or (status, complete, events)."""
    reader, events = EventStreamReader(), []
    try:
        for part in parts:
            events += reader.feed(part)
        events += reader.eof()
    except MalformedStream:
        return ("malformed",)
    assert all(isinstance(event, bytes) for event in events)
    return reader.status, reader.complete, events


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


def same_however_split(answer: bytes, cuts: list[int]) -> None:
    whole = read([answer])
    assert read(split(answer, cuts)) == whole
    if len(answer) <= 4_000:  # one byte per read: the most splits there are
        assert read([answer[i:i + 1] for i in range(len(answer))]) == whole


cut_lists = st.lists(st.integers(min_value=0, max_value=MAX_HEAD_BYTES + 600), max_size=12)
FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=FAST_EXAMPLES, **FUZZ)
@given(answer=answers(), cuts=cut_lists)
def test_any_answer_gives_the_same_outcome_however_the_reads_split_it(answer, cuts):
    same_however_split(answer, cuts)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, **FUZZ)
@given(answer=answers(), cuts=cut_lists)
def test_any_answer_gives_the_same_outcome_however_the_reads_split_it_slow(answer, cuts):
    same_however_split(answer, cuts)


@settings(max_examples=FAST_EXAMPLES, **FUZZ)
@given(garbage=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_any_bytes_at_all_fail_only_as_a_malformed_stream(garbage, cuts):
    same_however_split(garbage, cuts)


@pytest.mark.parametrize("status_line", [b"HTTP/1.1 2\xb20 OK", b"HTTP/1.1 \xb2\xb3\xb9 OK",
                                         "HTTP/1.1 ٢٠٠ OK".encode()])
def test_digits_of_other_scripts_in_the_status_line_are_malformed(status_line):
    assert read([status_line + b"\r\n\r\n"]) == ("malformed",)


@pytest.mark.parametrize("length", [b"\xb2", b"1\xb2", "٣".encode(), b"-1", b"0x10"])
def test_a_content_length_that_is_not_ascii_digits_is_malformed(length):
    assert read([b"HTTP/1.1 200 OK\r\ncontent-length: " + length + b"\r\n\r\n"]) == ("malformed",)


@pytest.mark.parametrize("size", [b"-5", b"0x10", b"1_0", b"+3"])
def test_a_chunk_size_that_is_not_hex_digits_is_malformed(size):
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + size + b"\r\ndata: a\n\r\n0\r\n\r\n"
    assert read([answer]) == ("malformed",)


@pytest.mark.parametrize(("limit", "padding"), [(MAX_HEAD_BYTES, "x-pad: {}\r\n\r\n"),
                                                 (MAX_CHUNK_SIZE_LINE, "transfer-encoding: chunked\r\n\r\n1;{}\r\n")])
def test_the_head_and_size_line_limits_hold_in_one_read_and_in_many(limit, padding):
    answer = ("HTTP/1.1 200 OK\r\n" + padding.format("p" * limit)).encode()
    assert read([answer]) == read([answer[:100], answer[100:]]) == ("malformed",)
