"""An incremental HTTP/1.1 response reader for event streams, with no I/O of its own.

`EventStreamReader.feed(bytes)` takes whatever the socket gave and returns the data of the events
completed by it (bytes, stripped; `[DONE]` included). It reads the status line and headers, then a
chunked, sized or read-until-close body, and reads the body as the SSE specification (WHATWG HTML,
"Server-sent events") says: one leading byte-order mark is dropped; lines end in LF, CRLF or CR;
a line starting with `:` is a comment; `field:value` drops one space after the colon, and a line
without a colon is a field with an empty value; the `data` fields of one event are joined with
"\n", and a blank line ends the event. `event`, `id`, `retry` and unknown fields are skipped, as
the clients only ever need the data. Where the stream ends, an event not yet ended by its blank
line still counts (the spec drops it; a server that closes right after `data: [DONE]` is common).
A line, or an event's data, of more than MAX_EVENT_BYTES is refused however the reads split it, so
a server that never ends its line or its event cannot make the reader hold more.
The reader is a plain state machine so that the transport can call it from the socket callback,
stamp the arrival there and hand over only finished events.
"""

from __future__ import annotations

import re

from harness.engines.base import MalformedStream

MAX_HEAD_BYTES = 64 * 1024  # a status line and headers longer than this are not an HTTP answer
MAX_CHUNK_SIZE_LINE = 1024  # a chunk size line (with its extensions) longer than this is not HTTP
# ASCII only: str.isdigit() also takes "²" and "٣", which int() then refuses with a ValueError.
_STATUS_LINE = re.compile(rb"HTTP/1\.[0-9] ([0-9]{3})(?: .*)?", re.DOTALL)
_DECIMAL = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
MAX_ERROR_BODY = 4096  # of an error answer, only the start is kept for the message
# The largest line or event a client takes: far above any a server sends (a cumulative SGLang chunk
# of a long answer is hundreds of KB; a record holds a 2 MiB field whole), and the most one stream
# can make the client hold, where an event never ended could take all of its memory.
MAX_EVENT_BYTES = 8 * 1024 * 1024
DATA = b"data"
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark, dropped once at the start of the body


class EventStreamReader:
    """The state of one HTTP response being read: head, then body framing, then SSE lines."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.complete = False  # the body ended as its framing says (or the connection closed a close-body)
        self.reusable = False  # the connection may carry another request afterwards
        self._raw = bytearray()  # bytes not yet taken by the head or the body framing
        self._lines = bytearray()  # body bytes not yet split into lines
        self._chunk_left: int | None = None  # chunked: bytes left in the current chunk (None: at a size line)
        self._length: int | None = None  # sized body: bytes left
        self._chunked = False
        self._trailers = False
        self.error_body = bytearray()  # the start of a non-2xx answer's body
        self._data: list[bytes] | None = None  # the data fields of the event being read (None: none yet)
        self._data_bytes = 0  # their bytes, joins included
        self._at_start = True  # no body byte read yet: a byte-order mark may come
        self._after_cr = False  # the last line read ended in CR: an LF first in the next read ends no line

    def feed(self, data: bytes) -> list[bytes]:
        """Take newly received bytes; return the `data:` payloads of the lines they complete."""
        self._raw += data
        if self.status is None and not self._read_head():
            return []
        if self._chunked:
            self._unchunk()
        elif self._length is not None:
            take = min(self._length, len(self._raw))
            self._body(self._raw, 0, take)
            del self._raw[:take]
            self._length -= take
            self.complete = self.reusable = self._length == 0
        else:
            self._body(self._raw, 0, len(self._raw))
            self._raw.clear()
        return self._events(final=self.complete)

    def eof(self) -> list[bytes]:
        """The connection closed: a read-until-close body ends here; the last line counts."""
        if self.status is not None and not self._chunked and self._length is None:
            self.complete = True
        return self._events(final=True)

    @property
    def ok(self) -> bool:
        return self.status is not None and self.status < 400

    def _read_head(self) -> bool:
        end = _bounded_find(self._raw, b"\r\n\r\n", MAX_HEAD_BYTES, "the status line and headers")
        if end < 0:
            return False
        head = bytes(self._raw[:end])
        del self._raw[:end + 4]
        status_line, _, rest = head.partition(b"\r\n")
        matched = _STATUS_LINE.fullmatch(status_line)
        if matched is None:
            raise MalformedStream(f"answer is not HTTP/1.x: {status_line[:80]!r}")
        self.status = int(matched.group(1))
        for line in rest.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not self._chunked and "content-length" in self.headers:
            self._length = _content_length(self.headers["content-length"])
        self.reusable = "close" not in self.headers.get("connection", "").lower()
        return True

    def _unchunk(self) -> None:
        """Move whole or partial chunk data from the raw bytes to the body, dropping the framing."""
        raw = self._raw
        while raw and not self.complete:
            if self._trailers:
                end = _bounded_find(raw, b"\r\n", MAX_HEAD_BYTES, "a trailer line")
                if end < 0:
                    return
                del raw[:end + 2]
                self.complete = end == 0  # a blank line ends the trailers and the body
                continue
            if self._chunk_left is None:
                end = _bounded_find(raw, b"\r\n", MAX_CHUNK_SIZE_LINE, "a chunk size line")
                if end < 0:
                    return
                self._chunk_left = _chunk_size(bytes(raw[:end]))
                del raw[:end + 2]
                if self._chunk_left == 0:
                    self._trailers, self._chunk_left = True, None
                continue
            if len(raw) < self._chunk_left + 2:
                if len(raw) > self._chunk_left:  # all the data is here, its CRLF not yet
                    return
                self._body(raw, 0, len(raw))
                self._chunk_left -= len(raw)
                raw.clear()
                return
            self._body(raw, 0, self._chunk_left)
            if raw[self._chunk_left:self._chunk_left + 2] != b"\r\n":
                raise MalformedStream("chunk data not followed by CRLF")
            del raw[:self._chunk_left + 2]
            self._chunk_left = None

    def _body(self, raw: bytearray, start: int, end: int) -> None:
        """Body bytes `raw[start:end]`, copied once (a cumulative SGLang chunk is tens of KB)."""
        with memoryview(raw) as view:
            if self.ok:
                self._lines += view[start:end]
            elif len(self.error_body) < MAX_ERROR_BODY:
                self.error_body += view[start:min(end, start + MAX_ERROR_BODY - len(self.error_body))]

    def _events(self, final: bool) -> list[bytes]:
        """Split the body into lines; return the data of the events they complete."""
        buffer = self._lines
        if self._at_start and not self._drop_bom(final):
            return []
        end = len(buffer) if final else max(buffer.rfind(b"\n"), buffer.rfind(b"\r")) + 1
        if len(buffer) - end > MAX_EVENT_BYTES:  # a line not yet ended, already too long
            raise _too_long("a line")
        if end <= 0:
            return self._flush() if final else []
        with memoryview(buffer) as view:
            text = bytes(view[:end])
        del buffer[:end]
        if self._after_cr and text.startswith(b"\n"):  # the LF of a CRLF split between reads
            text = text[1:]
        self._after_cr = text.endswith(b"\r")
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = text.split(b"\n")
        if not final or not lines[-1]:
            lines.pop()  # what follows the last line end: nothing (or, at the end, an unended line)
        events: list[bytes] = []
        for line in lines:
            self._line(line, events)
        return events + self._flush() if final else events

    def _drop_bom(self, final: bool) -> bool:
        """Drop a byte-order mark at the start of the body; False to wait for more bytes."""
        buffer = self._lines
        if len(buffer) < len(BOM) and BOM.startswith(bytes(buffer)) and not final:
            return False
        if buffer.startswith(BOM):
            del buffer[:len(BOM)]
        self._at_start = False
        return True

    def _line(self, line: bytes, events: list[bytes]) -> None:
        """One SSE line: a blank line ends the event; a `data` field adds a line to its data."""
        if len(line) > MAX_EVENT_BYTES:
            raise _too_long("a line")
        if not line:
            events += self._flush()
        elif line.startswith(DATA):
            if line.startswith(b"data: "):
                value = line[6:]  # the usual shape: one copy
            elif line.startswith(b"data:") or line == DATA:
                value = line[5:]
            else:
                return  # another field whose name starts with "data"
            self._data_bytes += len(value) + (self._data is not None)  # the join before it
            if self._data_bytes > MAX_EVENT_BYTES:
                raise _too_long("an event's data")
            if self._data is None:
                self._data = [value]
            else:
                self._data.append(value)

    def _flush(self) -> list[bytes]:
        """The data of the event read so far, as one payload (none when it had no data field)."""
        data, self._data, self._data_bytes = self._data, None, 0
        if data is None:
            return []
        return [_payload(data[0] if len(data) == 1 else b"\n".join(data))]


def _payload(data: bytes) -> bytes:
    """An event's data without surrounding whitespace (no copy in the usual `data: {...}`)."""
    if data[:1].isspace() or data[-1:].isspace():
        return data.strip()
    return data


def _too_long(what: str) -> MalformedStream:
    return MalformedStream(f"{what} of more than {MAX_EVENT_BYTES // 2**20} MiB, longer than any event a client takes")


def _bounded_find(raw: bytearray, separator: bytes, limit: int, what: str) -> int:
    """Where `separator` starts in `raw`, if what precedes it and itself fit in `limit` bytes; -1 to
    wait for more bytes. The limit is on the content, never on how the reads split it."""
    end = raw.find(separator, 0, limit)
    if end >= 0:
        return end
    if len(raw) >= limit:
        raise MalformedStream(f"{what} is longer than {limit} bytes")
    return -1


def _content_length(value: str) -> int:
    digits = value.strip().encode("latin-1")
    if _DECIMAL.fullmatch(digits) is None:
        raise MalformedStream(f"bad content-length {value[:40]!r}")
    return int(digits)


def _chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line: hex digits only (int() would also take `0x`, `_`,
    signs and spaces)."""
    size = line.split(b";", 1)[0].strip(b" \t")
    if _HEX.fullmatch(size) is None:
        raise MalformedStream(f"bad chunk size line {line[:40]!r}")
    return int(size, 16)
