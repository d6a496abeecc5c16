"""Client-side timings of one request, from the client's own perf_counter stamps.

TTFT is measured to the first chunk that brought tokens (even a chunk whose text is empty because
a multi-byte character was held back), not to the first chunk carrying text as SGLang's bench does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.engines.base import ASSUMED_ONE_PER_CHUNK
from harness.metrics.values import NS_PER_MS, elapsed_ms, floats, int_array, ratio


def ttft_ms(df: pd.DataFrame) -> np.ndarray:
    """Time to first token, ms: `first_token_ns - sent_ns`. NaN when no token arrived."""
    return elapsed_ms(df["first_token_ns"], df["sent_ns"])


def e2e_ms(df: pd.DataFrame) -> np.ndarray:
    """End-to-end latency, ms: `end_ns - sent_ns`, where end is the arrival of `[DONE]`."""
    return elapsed_ms(df["end_ns"], df["sent_ns"])


def decode_ms(df: pd.DataFrame) -> np.ndarray:
    """Decode time, ms: `end_ns - first_token_ns` (= e2e_ms - ttft_ms), including the wait for `[DONE]`."""
    return elapsed_ms(df["end_ns"], df["first_token_ns"])


def tpot_ms(decode: np.ndarray, completion_tokens: np.ndarray) -> np.ndarray:
    """Time per output token after the first, ms: `decode_ms / (completion_tokens - 1)`.

    NaN when completion_tokens <= 1: a one-token answer has no decode phase.
    """
    return ratio(decode, completion_tokens - 1)


def decode_tok_s(tpot: np.ndarray) -> np.ndarray:
    """Per-request decode rate, tokens/s: `1000 / tpot_ms`. NaN where tpot_ms is NaN or 0."""
    return ratio(np.full_like(tpot, 1000.0), tpot)


def e2e_per_token_ms(e2e: np.ndarray, completion_tokens: np.ndarray) -> np.ndarray:
    """Length-normalized latency, ms/token: `e2e_ms / completion_tokens` (TTFT included)."""
    return ratio(e2e, completion_tokens)


def chunk_gaps_ms(chunk_ns: object) -> list[float]:
    """Raw gaps between consecutive token-bearing chunks, ms: `chunk_ns[i+1] - chunk_ns[i]`.

    A chunk may bring several tokens (speculative decoding), so these are NOT inter-token latencies.
    """
    return (np.diff(int_array(chunk_ns)) / NS_PER_MS).tolist()


def counts_from_server(meta: dict[str, Any]) -> bool:
    """Whether `chunk_tokens` holds the server's running counts. An OpenAI stream without running
    usage leaves the client to assume one token per text-bearing chunk, and it marks the meta so."""
    return meta.get("chunk_token_counts") != ASSUMED_ONE_PER_CHUNK


def chunk_gap_tokens(chunk_tokens: object, from_server: bool) -> list[int]:
    """Tokens brought by the chunk that ends each gap: `chunk_tokens[i+1] - chunk_tokens[i]`;
    empty when the counts were assumed by the client rather than reported by the server."""
    return np.diff(int_array(chunk_tokens)).tolist() if from_server else []


def itl_ms(gaps_ms: list[float], gap_tokens: list[int]) -> list[float]:
    """Per-token inter-token latency, ms: each chunk gap spread evenly over the tokens it brought.

    A gap of g ms ending in a chunk of k tokens contributes k entries of g / k. The list has
    `chunk_tokens[-1] - chunk_tokens[0]` entries and sums to `last_token_ns - first_token_ns`.
    Empty when the server's per-chunk token counts are missing.
    """
    if len(gaps_ms) != len(gap_tokens):
        return []
    tokens = np.asarray(gap_tokens, dtype=np.int64)
    return np.repeat(np.asarray(gaps_ms, dtype=float) / tokens, tokens).tolist()


def tokens_per_chunk(completion_tokens: np.ndarray, chunk_ns: pd.Series) -> np.ndarray:
    """Mean tokens per token-bearing chunk: `completion_tokens / len(chunk_ns)`; NaN without chunks."""
    return ratio(completion_tokens, np.array([len(int_array(cell)) for cell in chunk_ns], dtype=float))


def client_columns(df: pd.DataFrame, metas: list[dict[str, Any]]) -> dict[str, object]:
    """Every client-side per-request column, keyed by its name."""
    completion = floats(df["completion_tokens"])
    decode = decode_ms(df)
    tpot = tpot_ms(decode, completion)
    e2e = e2e_ms(df)
    gaps = [chunk_gaps_ms(cell) for cell in df["chunk_ns"]]
    gap_tokens = [chunk_gap_tokens(cell, counts_from_server(meta))
                  for cell, meta in zip(df["chunk_tokens"], metas)]
    # A failed request's counts were never checked (they may claim 10^9 tokens): its ITL is not
    # spread over them, so memory stays bounded whatever the server said.
    ok = (df["status"] == "ok").tolist() if "status" in df else [True] * len(df)
    return {
        "ttft_ms": ttft_ms(df),
        "e2e_ms": e2e,
        "decode_ms": decode,
        "tpot_ms": tpot,
        "decode_tok_s": decode_tok_s(tpot),
        "e2e_per_token_ms": e2e_per_token_ms(e2e, completion),
        "chunk_gaps_ms": gaps,
        "chunk_gap_tokens": gap_tokens,
        "itl_ms": [itl_ms(g, t) if good else [] for g, t, good in zip(gaps, gap_tokens, ok)],
        "tokens_per_chunk": tokens_per_chunk(completion, df["chunk_ns"]),
    }
