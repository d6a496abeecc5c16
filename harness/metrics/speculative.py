"""Speculative decoding per request, and the run's accept length weighted two ways.

Only per-request fields are read. SGLang's `/server_info` `avg_spec_accept_length` is a running
average since server start (warm-up and earlier runs included), so it is never used.
A request without speculation gets NaN in every column, never 1.0 or 0: "no drafts" is not
"drafts that were all rejected".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from harness.engines.registry import meta_reader


def speculation(meta: dict[str, Any], engine: str, completion_tokens: float) -> dict[str, float]:
    """Speculation columns (SPEC_COLUMNS) of one request, read by its engine's adapter."""
    return meta_reader(engine).speculation(meta, completion_tokens)


def engine_steps(meta: dict[str, Any], engine: str) -> float:
    """Engine steps the server reports for one request (its adapter knows how); NaN where none.

    SGLang with speculation: one prefill step plus its verify rounds. vLLM's `num_spec_steps`
    counts only drafting steps, so it is not a step count.
    """
    return meta_reader(engine).engine_steps(meta)


def tokens_per_step(completion_tokens: np.ndarray, steps: np.ndarray,
                    per_chunk: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
    """Output tokens per engine step, and where the step count came from.

    `completion_tokens / engine steps` where the server reports steps ("server_steps"), else
    tokens per token-bearing streamed chunk ("stream_chunks"; one chunk per step unless the server
    batches its stream), else NaN (None).
    """
    from_server = steps > 0
    values = np.where(from_server, completion_tokens / np.where(from_server, steps, 1.0), per_chunk)
    sources = ["server_steps" if s else ("stream_chunks" if not math.isnan(c) else None)
               for s, c in zip(from_server, per_chunk)]
    return values, sources


def accept_length_request_weighted(derived: pd.DataFrame) -> float:
    """Mean of per-request accept_length, tokens/round; NaN when no request speculated."""
    lengths = derived["accept_length"].dropna()
    return float(lengths.mean()) if len(lengths) else math.nan


def accept_length_parts(derived: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the numerator and denominator of `accept_length_token_weighted`:
    (accept_length * verify_rounds, verify_rounds), both 0 for a request without speculation.
    Compare resamples these pairs for its interval."""
    rounds = derived["verify_rounds"].to_numpy(dtype=float)
    tokens = derived["accept_length"].to_numpy(dtype=float) * rounds
    keep = np.isfinite(tokens) & (rounds > 0)
    return np.where(keep, tokens, 0.0), np.where(keep, rounds, 0.0)


def accept_length_token_weighted(derived: pd.DataFrame) -> float:
    """Run accept length, tokens/round: `sum(accept_length * verify_rounds) / sum(verify_rounds)`.

    That is total tokens over total rounds (for SGLang the numerator is the completion tokens), so
    long requests weigh in proportion to their rounds. NaN when no request reports rounds.
    """
    tokens, rounds = accept_length_parts(derived)
    return float(tokens.sum() / rounds.sum()) if rounds.sum() > 0 else math.nan
