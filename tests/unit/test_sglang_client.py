"""The SGLang client on recorded streams (cumulative as served by 0.5.23, and its incremental form)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path

import httpx
import pytest

from harness.engines.base import ConnectFailed, MalformedStream, ServerHTTPError, ServerUnreachable, StreamIncomplete
from harness.engines.sglang import generate, request_body
from harness.engines.sse import Session
from harness.spec import Prompt, SamplingParams
from tests.fakes.replay import mock_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROMPT = Prompt("p0", SamplingParams(max_new_tokens=5, ignore_eos=True), input_ids=(17, 6, 7))


def _run(body: bytes | str, status: int = 200, raise_exc: Exception | None = None):
    def handler(request: httpx.Request) -> httpx.Response:
        if raise_exc:
            raise raise_exc
        return httpx.Response(status, content=body if isinstance(body, bytes) else body.encode())

    async def go():
        async with mock_session(handler) as http:
            return await generate(http, "http://server", PROMPT)

    return asyncio.run(go())


def _final(sse: str) -> dict:
    chunks = [json.loads(b[6:]) for b in sse.split("\n\n") if b.startswith("data: {")]
    return chunks[-1]


@pytest.mark.parametrize("fixture, mode", [("sglang_0.5.23_cumulative.sse", "cumulative"),
                                           ("sglang_incremental_derived.sse", "incremental")])
def test_both_stream_forms_give_the_same_output(fixture, mode):
    cumulative = (FIXTURES / "sglang_0.5.23_cumulative.sse").read_text()
    result = _run((FIXTURES / fixture).read_text())
    expected = _final(cumulative)
    assert result.stream_mode == mode
    assert result.output_ids == expected["output_ids"]
    assert result.text == expected["text"]
    assert result.chunk_tokens == [1, 2, 3, 4, 5]
    assert result.completion_tokens == 5 and result.prompt_tokens == 8 and result.cached_tokens == 0
    assert result.finish_reason == "length"
    assert result.meta["e2e_latency"] > 0  # the final meta_info, kept raw
    assert result.sent_ns < result.first_token_ns == result.chunk_ns[0] <= result.last_token_ns <= result.end_ns


def test_multi_token_chunks_are_stamped_once_each():
    def chunk(ids, count):
        return "data: " + json.dumps({"text": "x" * len(ids), "output_ids": ids,
                                      "meta_info": {"completion_tokens": count}}) + "\n\n"
    body = chunk([1], 1) + chunk([2, 3, 4], 4) + chunk([], 4) + chunk([5], 5) + "data: [DONE]\n\n"
    result = _run(body)
    assert result.chunk_tokens == [1, 4, 5]  # the empty chunk brought no token and is not a chunk time
    assert result.output_ids == [1, 2, 3, 4, 5]
    assert result.stream_mode == "incremental"


def test_request_body_sends_every_sampling_parameter():
    prompt = Prompt("q", SamplingParams(max_new_tokens=9, temperature=0.6, top_p=0.95, top_k=29,
                                        stop=("Question:",), seed=7), text="hi")
    body = request_body(prompt)
    assert body["text"] == "hi" and "input_ids" not in body and body["stream"] is True
    assert body["sampling_params"] == {"temperature": 0.6, "top_p": 0.95, "top_k": 29, "max_new_tokens": 9,
                                       "ignore_eos": False, "stop": ["Question:"], "sampling_seed": 7}


def assert_failed(result, error: type, pattern: str) -> None:
    """The request ended failed, recorded as `error`'s kind, with a one-line reason matching `pattern`."""
    assert result.error_kind == error.kind
    assert re.search(pattern, result.error_message) and "\n" not in result.error_message
    assert result.end_ns >= result.sent_ns


def test_http_error_is_a_failed_result_with_one_line():
    assert_failed(_run('{"error": "prompt\\n too long"}', status=400), ServerHTTPError, r"HTTP 400: .*too long")


def test_error_object_mid_stream():
    assert_failed(_run('data: {"error": {"message": "boom"}}\n\n'), ServerHTTPError, "mid-stream")


def test_stream_without_done_keeps_its_tokens():
    body = (FIXTURES / "sglang_0.5.23_cumulative.sse").read_text().replace("data: [DONE]", "")
    result = _run(body)
    assert_failed(result, StreamIncomplete, "without \\[DONE\\]")
    assert result.chunk_tokens == [1, 2, 3, 4, 5]  # what arrived before the failure is kept


def test_non_json_chunk_is_malformed():
    assert_failed(_run("data: {not json\n\n"), MalformedStream, "not JSON")


def test_connection_reset_mid_stream_is_a_disconnect():
    assert_failed(_run("", raise_exc=httpx.ReadError("reset")), ServerUnreachable, "stopped answering")


def test_refused_connection_is_raised_the_request_was_never_sent():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        port = sock.getsockname()[1]

        async def go():
            async with Session() as http:
                return await generate(http, f"http://127.0.0.1:{port}", PROMPT)

        with pytest.raises(ConnectFailed, match="cannot connect"):
            asyncio.run(go())


def _flush(statuses: list[int]) -> tuple[object, int]:
    """Flush against a server answering `statuses` in turn; (result or raised error, requests sent)."""
    from harness.engines import sglang

    answers = iter(statuses)
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(next(answers), text="Flush cache failed.")

    async def go():
        async with mock_session(handler) as http:
            return await sglang.SGLangBackend().flush_prefix_cache(http, "http://server")

    try:
        return asyncio.run(go()), len(sent)
    except ServerHTTPError as exc:
        return exc, len(sent)


def test_flush_refused_while_the_last_request_is_freed_is_retried(monkeypatch):
    from harness.engines import sglang

    monkeypatch.setattr(sglang, "FLUSH_RETRY_S", 0.0)
    result, sent = _flush([400, 400, 200])
    assert result == "flushed (POST /flush_cache)" and sent == 3


def test_flush_still_refused_after_the_retries_is_one_line(monkeypatch):
    from harness.engines import sglang

    monkeypatch.setattr(sglang, "FLUSH_RETRY_S", 0.0)
    error, sent = _flush([400] * sglang.FLUSH_ATTEMPTS)
    assert sent == sglang.FLUSH_ATTEMPTS
    assert str(error) == ("http://server/flush_cache answered HTTP 400: Flush cache failed. "
                          "(use --keep-prefix-cache to skip the flush)")
    error, sent = _flush([500])
    assert sent == 1 and "answered HTTP 500" in str(error)
