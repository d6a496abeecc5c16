"""Accept length along the output: does acceptance decay over a long answer?

A request's stream tells where in its answer each verify step's tokens landed, when each
token-bearing chunk is one step: SGLang streams a chunk per verify round (the first chunk brings the
prefill token), so the chunk after running count c brought the tokens of the step that began at
output position c. Requests whose chunks are not steps (their chunk count differs from their verify
rounds + 1, as llama.cpp's one chunk per token; or a stream the integrity rules flagged) are left
out, and a run without any such request has no figure ("not measured"). The last step of a request
cut at its token cap is left out too: it brought only the tokens up to the cap.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.values import int_array

DEFAULT_BINS = 8


def step_positions(chunk_tokens: object) -> tuple[np.ndarray, np.ndarray]:
    """(output position where each verify step began, tokens it brought) from the server's running
    counts: every chunk after the first."""
    counts = int_array(chunk_tokens)
    return counts[:-1], np.diff(counts)


def capped(steps: tuple[np.ndarray, np.ndarray], finish_reason: object) -> tuple[np.ndarray, np.ndarray]:
    """The steps without the last one of a request cut at its token cap (`finish_reason` length):
    the server verified a whole round but sent only the tokens up to the cap."""
    if finish_reason != "length":
        return steps
    return steps[0][:-1], steps[1][:-1]


def steps_are_chunks(derived: pd.DataFrame) -> np.ndarray:
    """Requests whose token-bearing chunks are their verify steps (one chunk per round after the
    prefill chunk) and whose stream the integrity rules left in."""
    chunks = np.array([len(int_array(cell)) for cell in derived["chunk_tokens"]], dtype=float)
    flagged = derived["stream_flagged"].fillna(False).to_numpy(dtype=bool) if "stream_flagged" in derived else False
    return (chunks - 1 == derived["verify_rounds"].to_numpy(dtype=float)) & (chunks > 1) & ~flagged


def accept_length_by_position(derived: pd.DataFrame, bins: int = DEFAULT_BINS) -> pd.DataFrame:
    """Tokens per verify step in output-position bins, tokens/step: `sum(tokens) / steps` over the
    steps that began in the bin, pooled over the requests `steps_are_chunks` keeps. Equal-width bins
    from 0 to the longest output. Columns bin_start, bin_end, steps, accept_length; empty when no
    request qualifies."""
    rows = derived[steps_are_chunks(derived)]
    pairs = [capped(step_positions(cell), reason) for cell, reason in zip(rows["chunk_tokens"], rows["finish_reason"])]
    if not pairs:
        return pd.DataFrame(columns=["bin_start", "bin_end", "steps", "accept_length"])
    starts = np.concatenate([p for p, _ in pairs])
    tokens = np.concatenate([t for _, t in pairs])
    edges = np.linspace(0, max(starts.max() + 1, bins), bins + 1)
    which = np.clip(np.searchsorted(edges, starts, side="right") - 1, 0, bins - 1)
    steps = np.bincount(which, minlength=bins)
    sums = np.bincount(which, weights=tokens, minlength=bins)
    length = [s / n if n else math.nan for s, n in zip(sums, steps)]
    return pd.DataFrame({"bin_start": edges[:-1], "bin_end": edges[1:], "steps": steps, "accept_length": length})
