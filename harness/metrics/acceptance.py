"""Acceptance per draft position: what a histogram of verify steps says about a drafter.

The histogram `h` counts verify steps by accepted drafts: `h[k]` steps accepted exactly k draft
tokens, k = 0 .. K (K draft tokens a step). SGLang reports one per request
(`spec_correct_drafts_histogram`); vLLM counts, over the server's life, how often the draft at each
position was accepted (`accepted_tokens_pos_<k>` counter deltas, turned into the same histogram by
`histogram_from_position_counts`); llama.cpp reports neither ("not exported"). Every function here
takes a histogram and nothing else, so the figures mean the same whatever the engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from harness.engines.prometheus import POSITION_KEY
from harness.engines.registry import meta_reader
from harness.metrics.values import parse_meta

Histogram = list[float]


def request_histograms(df: pd.DataFrame) -> list[list[int] | None]:
    """Each request's histogram, read by its engine's adapter from its meta (None: not exported)."""
    return [meta_reader(engine).draft_histogram(parse_meta(raw))
            for engine, raw in zip(df["engine"].astype(str), df["meta_info_json"])]


def pooled_histogram(histograms: Iterable[Sequence[float] | None]) -> Histogram | None:
    """Element-wise sum of the histograms given (shorter ones padded with zeros); None when none is."""
    given = [np.asarray(h, dtype=float) for h in histograms if h is not None]
    if not given:
        return None
    total = np.zeros(max(len(h) for h in given))
    for h in given:
        total[:len(h)] += h
    return total.tolist()


def histogram_from_position_counts(drafts: float, accepted_by_position: Sequence[float]) -> Histogram | None:
    """The histogram of `drafts` drafting steps whose draft at position k (0-based) was accepted
    `accepted_by_position[k]` times: `h[0] = drafts - a[0]`, `h[k] = a[k-1] - a[k]`, `h[K] = a[K-1]`
    (a chain of drafts: position k is accepted only after every earlier one). None without drafts."""
    if not drafts > 0 or not accepted_by_position:
        return None
    reached = [float(drafts), *map(float, accepted_by_position)]
    return [reached[k] - reached[k + 1] for k in range(len(reached) - 1)] + [reached[-1]]


def counter_histogram(delta: dict[str, float]) -> Histogram | None:
    """The histogram from a run's counter delta (`drafts`, `accepted_tokens_pos_<k>`); None when the
    server counts no acceptance per position."""
    positions = sorted((int(key.removeprefix(POSITION_KEY)), value) for key, value in delta.items()
                       if key.startswith(POSITION_KEY))
    return histogram_from_position_counts(delta.get("drafts", 0.0), [value for _, value in positions])


def acceptance_by_position(h: Sequence[float]) -> list[float]:
    """Acceptance rate at draft position k = 1 .. K, fraction: the chance that the k-th draft token
    is accepted given that the k - 1 before it were, `S(k) / S(k - 1)` with `S(k) = sum(h[k:])`
    (steps that accepted at least k drafts; S(0) is every step). NaN where no step reached k - 1."""
    reached = np.cumsum(np.asarray(h, dtype=float)[::-1])[::-1]  # reached[k] = S(k)
    return [float(reached[k] / reached[k - 1]) if reached[k - 1] > 0 else math.nan for k in range(1, len(reached))]


def tokens_per_step_shares(h: Sequence[float]) -> list[float]:
    """Distribution of tokens per verify step, fraction of steps: entry j is the share of steps that
    produced j + 1 tokens (j accepted drafts plus the bonus token), `h[j] / sum(h)`."""
    counts = np.asarray(h, dtype=float)
    steps = counts.sum()
    return (counts / steps).tolist() if steps > 0 else [math.nan] * len(counts)


def histogram_accept_length(h: Sequence[float]) -> float:
    """Tokens per verify step implied by the histogram, tokens/step: `sum((k + 1) * h[k]) / sum(h)`
    (accepted drafts plus the bonus token; Spec-Bench's "mean accepted tokens"). SGLang's own accept
    length, `completion_tokens / spec_verify_ct`, also counts the prefill token and keeps only the
    tokens of the last round up to the cap, so the two meet as answers grow long. NaN without steps."""
    counts = np.asarray(h, dtype=float)
    steps = counts.sum()
    return float((counts * np.arange(1, len(counts) + 1)).sum() / steps) if steps > 0 else math.nan


def position_values(h: Histogram | None) -> dict[tuple[str, str], float]:
    """The summary rows of one histogram, `(metric, stat) -> value`: accept length, acceptance at
    each position (`position_<k>`) given the earlier ones and over every step, and the share of steps by tokens (`tokens_<j>`); with no
    histogram only the accept length row, NaN ("not exported")."""
    if h is None:
        return {("accept_length_histogram", "value"): math.nan}
    rows = {("accept_length_histogram", "value"): histogram_accept_length(h),
            ("verify_steps_histogram", "value"): float(sum(h))}
    rows |= {("acceptance_at_position", f"position_{k}"): rate for k, rate in enumerate(acceptance_by_position(h), 1)}
    rows |= {("acceptance_at_position_unconditional", f"position_{k}"): rate
             for k, rate in enumerate(unconditional_acceptance_by_position(h), 1)}
    rows |= {("tokens_per_step_share", f"tokens_{j}"): share for j, share in enumerate(tokens_per_step_shares(h), 1)}
    return rows


def unconditional_acceptance_by_position(h: Sequence[float]) -> list[float]:
    """Acceptance at draft position k = 1 .. K over every drafting step, fraction: `S(k) / S(0)`, the
    chance that a step accepted at least k drafts (vLLM's and llama.cpp's "per-position acceptance
    rate": accepted at position k over drafts). NaN without steps."""
    reached = np.cumsum(np.asarray(h, dtype=float)[::-1])[::-1]
    return [float(reached[k] / reached[0]) if reached[0] > 0 else math.nan for k in range(1, len(reached))]


def definition_values(accepted: Sequence[float], rounds: Sequence[float], proposed: Sequence[float]) -> dict[str, float]:
    """Acceptance under each engine's and tool's definition, from per-request counts (accepted draft
    tokens `a`, verify rounds `r`, proposed draft tokens `p`); requests without rounds are left out,
    and a figure without its denominator is NaN. docs/metrics.md names whose definition each is.

    - `mean_acceptance_length_request_weighted`: `mean(1 + a / r)` (bonus token included)
    - `mean_acceptance_length_token_weighted`: `1 + sum(a) / sum(r)` (bonus token included)
    - `accepted_drafts_per_round`: `sum(a) / sum(r)` (no bonus token)
    - `draft_acceptance_rate_request_weighted`: `mean(a / p)`
    - `draft_acceptance_rate_token_weighted`: `sum(a) / sum(p)`
    - `accepted_per_verified_request_weighted`: `mean((a + r) / (p + r))`
    """
    a, r, p = (np.asarray(x, dtype=float) for x in (accepted, rounds, proposed))
    keep = np.isfinite(a) & np.isfinite(r) & (r > 0)
    a, r, p = a[keep], r[keep], p[keep]
    drafted = np.isfinite(p) & (p > 0)

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if values.size else math.nan

    def ratio(top: float, bottom: float) -> float:
        return float(top / bottom) if bottom > 0 else math.nan

    return {
        "mean_acceptance_length_request_weighted": mean(1 + a / r),
        "mean_acceptance_length_token_weighted": 1 + ratio(a.sum(), r.sum()),
        "accepted_drafts_per_round": ratio(a.sum(), r.sum()),
        "draft_acceptance_rate_request_weighted": mean(a[drafted] / p[drafted]),
        "draft_acceptance_rate_token_weighted": ratio(a[drafted].sum(), p[drafted].sum()),
        "accepted_per_verified_request_weighted": mean((a[drafted] + r[drafted]) / (p[drafted] + r[drafted])),
    }


def position_table(h: Sequence[float]) -> pd.DataFrame:
    """The histogram beside the acceptance at each position, one row per accepted-draft count k =
    0 .. K: `steps` h[k] (steps that accepted exactly k drafts), `share` h[k] / sum(h), and for
    k >= 1 `conditional` S(k) / S(k - 1) (draft k accepted given draft k - 1 was) and
    `unconditional` S(k) / S(0) (NaN at k = 0)."""
    counts = [float(x) for x in h]
    conditional = [math.nan, *acceptance_by_position(counts)]
    unconditional = [math.nan, *unconditional_acceptance_by_position(counts)]
    return pd.DataFrame({"k": range(len(counts)), "steps": counts, "share": tokens_per_step_shares(counts),
                         "conditional": conditional, "unconditional": unconditional})
