"""Probe: does an OpenAI-API server stream each token when it makes it? A plain client, no harness code.

Not a test: prints one line per request. Run from the repository root against a running server:
`.venv/bin/python -m tests.bench_stream --server http://127.0.0.1:PORT [--requests 10] [--input 512]
[--output 256]`. Greedy completions of random token ids (distinct first tokens, so no prefix is
cached), streamed with running usage. Per request: client TTFT against the server's own
(`time_to_first_token_ms`, vLLM with `--enable-per-request-metrics`), the time over which the
client saw tokens arrive against the server's `generation_time_ms`, the number of chunks, and the
largest share of the answer that arrived in one chunk. A server that streams honestly shows a
client span close to the server's and a largest chunk of a few tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time

import httpx


def stream_once(http: httpx.Client, url: str, model: str, prompt: list[int], output: int) -> dict:
    """Send one request; return the client's stamps per token-bearing chunk and the server's metrics."""
    body = {"model": model, "prompt": prompt, "max_tokens": output, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    sent, arrivals, counts, metrics = time.perf_counter(), [], [], {}
    with http.stream("POST", url + "/v1/completions", json=body) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            count = (chunk.get("usage") or {}).get("completion_tokens", 0)
            metrics = chunk.get("metrics") or metrics
            if chunk.get("choices") and count > (counts[-1] if counts else 0):
                arrivals.append(time.perf_counter() - sent)
                counts.append(count)
    return {"arrivals": arrivals, "counts": counts, "metrics": metrics}


def describe(result: dict) -> str:
    arrivals, counts, metrics = result["arrivals"], result["counts"], result["metrics"]
    steps = [b - a for a, b in zip([0, *counts[:-1]], counts)]
    server_ttft, server_decode = (metrics.get(k, math.nan) for k in ("time_to_first_token_ms", "generation_time_ms"))
    return (f"client ttft {arrivals[0] * 1000:7.1f} ms (server {server_ttft:6.1f})"
            f"  tokens seen over {(arrivals[-1] - arrivals[0]) * 1000:7.1f} ms (server generation {server_decode:6.1f})"
            f"  chunks {len(counts):4d}  largest chunk {max(steps) / counts[-1]:6.1%} of {counts[-1]} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--input", type=int, default=512)
    parser.add_argument("--output", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=500, help="token ids are drawn below this")
    args = parser.parse_args()
    rng = random.Random(0)
    with httpx.Client(timeout=300.0) as http:
        model = http.get(args.server + "/v1/models").json()["data"][0]["id"]
        stream_once(http, args.server, model, [1] * 16, 16)  # warm-up: the first request compiles
        for i in range(args.requests):
            prompt = [10 + i] + [rng.randrange(10, args.vocab) for _ in range(args.input - 1)]
            print(f"{i:2d}  {describe(stream_once(http, args.server, model, prompt, args.output))}", flush=True)


if __name__ == "__main__":
    main()
