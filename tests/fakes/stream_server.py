"""A scripted streaming server on loopback: SGLang-native and OpenAI stream shapes, faults on demand.

Test equipment only. It answers like an engine with `ignore_eos`: as many tokens as the request asks
for, made on a fixed schedule (first token after `first_token_s`, then `tokens_per_step` tokens
every `step_s`). The server's own timing reports when tokens were MADE (SGLang meta_info latencies,
vLLM per-request metrics); a fault decides when they are SENT, as a proxy, a starved output process
or a stream interval would:

- `none`: each step is sent when it is made;
- `buffer_all`: the whole answer is held and sent in one chunk when the last token is made;
- `buffer_half`: the first half streams, the second half is held and sent at the end;
- `textless`: chunks go out on time but carry no text and no running usage; the last one carries
  all of it (an OpenAI-shaped stream the client cannot count).

Use `serving(Script(...))` as a context manager; it yields the base URL. A new fault is one entry
in `FAULTS` (which steps it holds back until the answer is complete); `faulty_requests` limits it
to the first requests, as a passing hiccup would. Each step is made a fixed gap
after the one before, and the server's timing reports when each step was really made, so a busy
test host that delays the fake delays its own figures with it, never only the client's.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_COUNT_LOCK = threading.Lock()
TOKEN_TEXT = "ab "  # every token decodes to the same three characters
MODEL = "fake-model"
MAX_MODEL_LEN = 2048  # the context it states on /v1/models, as vLLM does


@dataclass(frozen=True)
class Script:
    """How the fake engine makes its tokens and how the stream misbehaves."""

    fault: str = "none"
    api: str = "openai"  # "sglang" also serves /server_info, so detection picks the native client
    first_token_s: float = 0.02
    step_s: float = 0.005
    tokens_per_step: int = 1
    server_timing: bool = True  # report SGLang latencies / vLLM per-request metrics
    faulty_requests: int | None = None  # the fault hits only the first N generate requests (None: all)
    # A prefix cache: each token-id prompt's longest common prefix with any earlier one is reported
    # as cached (SGLang meta_info, OpenAI usage details) and counted in vLLM-style /metrics counters.
    prefix_cache: bool = False


def step_counts(script: Script, tokens: int) -> list[int]:
    """Running token count after each step: one token from prefill, then `tokens_per_step` per step."""
    counts = [1]
    while counts[-1] < tokens:
        counts.append(min(tokens, counts[-1] + script.tokens_per_step))
    return counts


def _hold_none(count: int, total: int) -> bool:
    return False


def _hold_all(count: int, total: int) -> bool:
    return True


def _hold_second_half(count: int, total: int) -> bool:
    return count > total / 2


# fault -> whether the step that brings the count to `count` (of `total`) is held until the end
FAULTS: dict[str, Callable[[int, int], bool]] = {
    "none": _hold_none, "buffer_all": _hold_all, "buffer_half": _hold_second_half, "textless": _hold_none,
}


def _sglang_meta(script: Script, count: int, total: int, prompt_tokens: int, done: bool,
                 made: list[float], cached: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"id": "fake", "prompt_tokens": prompt_tokens, "completion_tokens": count,
                            "cached_tokens": cached, "finish_reason": {"type": "length", "length": total} if done else None}
    if done and script.server_timing:
        meta |= {"first_token_latency": made[0], "e2e_latency": made[-1]}
    return meta


def sglang_chunk(script: Script, count: int, total: int, prompt_tokens: int, made: list[float],
                 cached: int = 0) -> dict:
    """A cumulative SGLang `/generate` chunk: all text and ids so far, meta_info with the count.
    `made`: seconds after arrival at which each step so far was made."""
    return {"text": TOKEN_TEXT * count, "output_ids": list(range(count)),
            "meta_info": _sglang_meta(script, count, total, prompt_tokens, count == total, made, cached)}


def _vllm_metrics(made: list[float]) -> dict[str, float]:
    return {"time_to_first_token_ms": made[0] * 1000, "generation_time_ms": (made[-1] - made[0]) * 1000}


def openai_chunk(script: Script, new: int, count: int, total: int, chat: bool) -> dict:
    """A completions (or chat) delta chunk; running usage unless the fault hides the counts."""
    textless = script.fault == "textless"
    text = (TOKEN_TEXT * total if count == total else "") if textless else TOKEN_TEXT * new
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if count == total else None}
    choice |= {"delta": {"content": text}} if chat else {"text": text}
    body: dict[str, Any] = {"id": "fake", "object": "chunk", "model": MODEL, "choices": [choice]}
    if not textless:
        body["usage"] = {"completion_tokens": count}
    return body


def openai_usage_chunk(script: Script, total: int, prompt_tokens: int, made: list[float], cached: int = 0) -> dict:
    """The closing chunk: empty choices, final usage (with the cached prompt tokens where the fake
    caches), and vLLM-style per-request metrics."""
    body: dict[str, Any] = {"id": "fake", "object": "chunk", "model": MODEL, "choices": [],
                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": total,
                                      "total_tokens": prompt_tokens + total}}
    if script.prefix_cache:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    if script.server_timing:
        body["metrics"] = _vllm_metrics(made)
    return body


def _prompt_tokens(body: dict[str, Any]) -> int:
    prompt = body.get("input_ids") or body.get("prompt") or body.get("text") or body.get("messages") or ""
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


def _common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _requested_tokens(body: dict[str, Any]) -> int:
    sampling = body.get("sampling_params") or body
    return int(sampling.get("max_new_tokens") or sampling.get("max_tokens") or 16)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script  # set on the subclass that `serving` makes

    def setup(self) -> None:
        super().setup()
        # Each event must leave at once: Nagle would merge small writes and blur arrival times.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        models = {"object": "list", "data": [{"id": MODEL, "root": "/fake", "owned_by": "vllm",
                                              "max_model_len": MAX_MODEL_LEN}]}
        routes = {"/health": {}, "/v1/models": models, "/version": {"version": "fake"}}
        if self.script.prefix_cache and self.path == "/metrics":
            self._prometheus()
            return
        if self.script.api == "sglang":
            routes |= {"/server_info": {"version": "fake"}, "/model_info": {"model_path": "/fake"}}
        if self.path in routes:
            self._json(200, routes[self.path])
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        arrived = time.perf_counter()
        if self.path not in ("/generate", "/v1/completions", "/v1/chat/completions"):
            self._json(404, {"detail": "Not Found"})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._stream(body, arrived)

    def _prometheus(self) -> None:
        queries, hits = getattr(self.server, "cache_counts", (0, 0))
        data = (f"# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}.0\n"
                f"# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}.0\n").encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _cached_tokens(self, body: dict[str, Any]) -> int:
        """The prompt's tokens an earlier prompt already brought (a token-id prompt; 0 for text), counted."""
        prompt = body.get("input_ids") or body.get("prompt")
        if not self.script.prefix_cache or not isinstance(prompt, list):
            return 0
        with _COUNT_LOCK:
            seen = self.server.__dict__.setdefault("cached_prompts", [])
            cached = max((_common_prefix(prompt, earlier) for earlier in seen), default=0)
            seen.append(prompt)
            queries, hits = getattr(self.server, "cache_counts", (0, 0))
            self.server.cache_counts = (queries + len(prompt), hits + cached)
        return cached

    def _event(self, payload: Any) -> None:
        line = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _fault(self) -> str:
        """This request's fault: the script's, unless the first `faulty_requests` have had it."""
        with _COUNT_LOCK:  # the server's handler threads count on the server object
            seen = self.server.generate_requests = getattr(self.server, "generate_requests", 0) + 1
        limit = self.script.faulty_requests
        return self.script.fault if limit is None or seen <= limit else "none"

    def _stream(self, body: dict[str, Any], arrived: float) -> None:
        """Make each step a fixed gap after the one before; send it, or hold it as the fault says."""
        total, prompt_tokens = _requested_tokens(body), _prompt_tokens(body)
        self.cached = self._cached_tokens(body)
        script = replace(self.script, fault=self._fault())
        made: list[float] = []
        sent, held = 0, False
        for count in step_counts(script, total):
            time.sleep(script.first_token_s if not made else script.step_s)
            made.append(time.perf_counter() - arrived)
            if FAULTS[script.fault](count, total):
                held = True
                continue
            sent = self._chunk(script, body, sent, count, total, prompt_tokens, made)
        if held:
            self._chunk(script, body, sent, total, total, prompt_tokens, made)
        if self.path != "/generate":
            self._event(openai_usage_chunk(script, total, prompt_tokens, made, self.cached))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, script: Script, body: dict[str, Any], sent: int, count: int, total: int,
               prompt_tokens: int, made: list[float]) -> int:
        """Send the tokens from `sent` to `count` as one chunk of the request's shape; return `count`."""
        if self.path == "/generate":
            self._event(sglang_chunk(script, count, total, prompt_tokens, made, self.cached))
        else:
            self._event(openai_chunk(script, count - sent, count, total, self.path.endswith("chat/completions")))
        return count


@contextmanager
def serving(script: Script) -> Iterator[str]:
    """Serve `script` on a free loopback port in a thread; yield the base URL."""
    handler = type("ScriptedHandler", (_Handler,), {"script": script})
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url


@contextmanager
def threaded(server: ThreadingHTTPServer) -> Iterator[str]:
    """Run `server` in a daemon thread until the block ends; yield its base URL."""
    server.daemon_threads = True  # a handler still streaming must not hold the test at shutdown
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
