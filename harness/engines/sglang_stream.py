"""Reading SGLang's native stream at a flat cost per chunk, in both of its forms.

By default SGLang repeats ALL text and ids so far in every chunk (cumulative): decoding each chunk in
full costs O(n) per chunk, O(n^2) per request (a 2,048-token answer: 2 million ids decoded). Only
the running count in `meta_info` is needed per chunk; the text and ids of the LAST chunk are the
answer. So once a stream is known to be cumulative, each chunk decodes only its `meta_info` (the
last key SGLang writes, found from the end of the line), and the last chunk is decoded in full when
the stream ends. An incremental stream (`--incremental-streaming-output`) is decoded in full: its
chunks are small. A chunk that does not have that shape (an error object, another key order) is
decoded in full as well.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from harness.engines.base import MalformedStream, RequestFailed, ServerHTTPError, StreamResult, error_excerpt
from harness.engines.fields import optional_object, optional_text, reason, token_ids
from harness.engines.sse import json_object

META_KEY = b',"meta_info":'
_META = msgspec.json.Decoder(dict)
LAZY = "_text_and_ids_deferred"  # marks a chunk whose text and ids were left undecoded


def _meta_only(raw: bytes) -> dict[str, Any] | None:
    """The `meta_info` object of `{"text": ..., "output_ids": [...], "meta_info": {...}}`, decoded
    alone; None when the line has another shape. A `,"meta_info":` with an unescaped quote cannot be
    inside a JSON string, and one nested deeper leaves extra closing braces that fail the decode."""
    at = raw.rfind(META_KEY)
    if at < 0 or not raw.endswith(b"}"):
        return None
    try:
        return _META.decode(raw[at + len(META_KEY):-1])
    except (msgspec.DecodeError, RecursionError):  # not this shape, or too deep: json_object says which
        return None


class ChunkReader:
    """Decodes and folds one request's chunks (`decode` for post_sse, `absorb` for collect), then
    `finish` decodes the last cumulative chunk that was left undecoded."""

    def __init__(self) -> None:
        self.cumulative = False
        self.deferred: bytes | None = None  # the latest cumulative chunk, text and ids not yet decoded

    def decode(self, url: str, raw: bytes) -> dict[str, Any]:
        if self.cumulative:
            meta = _meta_only(raw)
            if meta is not None:
                self.deferred = raw
                return {"meta_info": meta, LAZY: True}
        self.deferred = None
        return json_object(url, raw)

    def absorb(self, result: StreamResult, chunk: dict[str, Any], now: int) -> None:
        """Fold one chunk into the result: token count, ids, text, mode; stamp it if it brought
        tokens. Every field is read by its type (`harness.engines.fields`)."""
        if "error" in chunk:
            raise ServerHTTPError(f"server reported an error mid-stream: {error_excerpt(str(chunk['error']))}")
        meta = optional_object(chunk, "meta_info") or {}
        count = meta.get("completion_tokens")
        if count is None:
            raise MalformedStream("SGLang chunk without meta_info.completion_tokens")
        reason(meta.get("finish_reason"), "meta_info.finish_reason")
        if not chunk.get(LAZY):
            self._take_text(result, chunk, count, result.tokens_so_far)
        result.meta = meta
        result.stamp_tokens(count, now)

    def _take_text(self, result: StreamResult, chunk: dict[str, Any], count: int, previous: int) -> None:
        # An id list as long as the server's count is the whole output so far. After the first
        # token only a cumulative stream can produce that; an incremental delta is always shorter.
        ids, text = token_ids(chunk, "output_ids"), optional_text(chunk, "text") or ""
        if len(ids) == count:
            result.output_ids = ids  # freshly parsed for this chunk: no copy needed
            result.text = text
            if previous > 0:
                result.stream_mode = "cumulative"
                self.cumulative = True
        else:
            result.output_ids.extend(ids)
            result.text += text
            result.stream_mode = "incremental"

    def finish(self, result: StreamResult, url: str) -> None:
        """Text and ids of the last cumulative chunk; a malformed one fails the request."""
        if self.deferred is None:
            return
        try:
            chunk = json_object(url, self.deferred)
            ids, text = token_ids(chunk, "output_ids"), optional_text(chunk, "text") or ""
        except RequestFailed as exc:
            if result.error_kind is None:
                result.fail(exc, time.perf_counter_ns())
            return
        result.output_ids, result.text = ids, text
