"""Benchmark: client CPU per streamed chunk, for SGLang's cumulative and incremental streams and
llama.cpp's native stream (one chunk per token, with its id and the server's running count).

Not a test: prints figures. Run from the repository root: `.venv/bin/python -m tests.bench_client`.
A recorded-shape stream of N tokens (one token per chunk) is fed through the real client over an
in-memory transport, so the time measured is the client's own parsing and bookkeeping. In the
cumulative form every chunk repeats all ids and text so far, so its cost grows with the square of
the output length; the incremental form (`--incremental-streaming-output`) stays flat.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from harness.engines import llamacpp
from harness.engines.sglang import generate
from harness.spec import Prompt, SamplingParams


def stream_body(tokens: int, cumulative: bool) -> bytes:
    lines = []
    for n in range(1, tokens + 1):
        ids = list(range(1000, 1000 + n)) if cumulative else [1000 + n - 1]
        text = "ab " * (n if cumulative else 1)
        meta = {"completion_tokens": n, "prompt_tokens": 8, "cached_tokens": 0, "finish_reason": None}
        lines.append("data: " + json.dumps({"text": text, "output_ids": ids, "meta_info": meta}))
    lines.append("data: [DONE]")
    return ("\n\n".join(lines) + "\n\n").encode()


def llamacpp_body(tokens: int) -> bytes:
    """llama.cpp's `/completion` stream as recorded (tests/fixtures/llamacpp_*), N tokens long."""
    chunks = [{"index": 0, "content": "ab ", "tokens": [1000 + n], "stop": False, "id_slot": -1,
               "tokens_predicted": n, "tokens_evaluated": 8} for n in range(1, tokens + 1)]
    chunks.append({"index": 0, "content": "", "tokens": [], "stop": True, "tokens_predicted": tokens,
                   "tokens_evaluated": 8, "stop_type": "limit", "timings": {"cache_n": 0, "predicted_n": tokens}})
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks).encode()


def llamacpp_send(http: httpx.AsyncClient, base_url: str, prompt: Prompt):
    return llamacpp.stream(http, base_url, llamacpp.request_body(prompt))


def client_seconds(body: bytes, repeats: int = 3, send=generate) -> float:
    prompt = Prompt("bench", SamplingParams(max_new_tokens=1), input_ids=(1, 2, 3))
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))

    async def once() -> float:
        async with httpx.AsyncClient(transport=transport) as http:
            start = time.process_time()
            await send(http, "http://bench", prompt)
            return time.process_time() - start

    return min(asyncio.run(once()) for _ in range(repeats))


def main() -> None:
    print(f"{'tokens':>7} {'stream':>12} {'MB sent':>8} {'client CPU ms':>14} {'us/chunk':>9}")
    for tokens in (256, 1024, 2048):
        for cumulative in (True, False):
            body = stream_body(tokens, cumulative)
            seconds = client_seconds(body)
            print(f"{tokens:>7} {'cumulative' if cumulative else 'incremental':>12} {len(body) / 1e6:>8.2f} "
                  f"{seconds * 1e3:>14.1f} {seconds / tokens * 1e6:>9.1f}")
        body = llamacpp_body(tokens)
        seconds = client_seconds(body, send=llamacpp_send)
        print(f"{tokens:>7} {'llama.cpp':>12} {len(body) / 1e6:>8.2f} {seconds * 1e3:>14.1f} {seconds / tokens * 1e6:>9.1f}")


if __name__ == "__main__":
    main()
