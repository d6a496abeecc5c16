"""Output-length normalization: metrics by output-length bin, length-matched throughput, and the
cost per correct answer.

Runs with sampled chain-of-thought answers differ in how much they write (mean GSM8K output grew
567 -> 607 tokens in the published runs), and per-token speed depends on length (a longer context
costs more attention per token; acceptance varies with content). Comparing two runs' throughput
therefore needs them compared at the same output-length mix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.metrics.derive import derive_requests
from harness.metrics.schema import DERIVED_COLUMNS, DISTRIBUTION_UNITS, STAT_UNITS
from harness.metrics.stats import describe, weighted_mean
from harness.metrics.values import floats, ratio

BIN_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms", "e2e_per_token_ms", "decode_tok_s", "accept_length",
               "completion_tokens")


def derived_table(df: pd.DataFrame) -> pd.DataFrame:
    """`df` itself when `derive_requests` already made it (a Run's derived table), else derived now."""
    return df if set(DERIVED_COLUMNS) <= set(df.columns) else derive_requests(df)


def bin_labels(edges: Sequence[float]) -> list[str]:
    """`[lo, hi)` labels of the bins between consecutive edges."""
    return [f"[{lo:g}, {hi:g})" for lo, hi in zip(edges[:-1], edges[1:])]


def length_bin_index(completion_tokens: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin of each request by completion_tokens: i where `edges[i] <= tokens < edges[i+1]`, else -1
    (outside the edges, or no count)."""
    index = np.searchsorted(np.asarray(edges, dtype=float), completion_tokens, side="right") - 1
    return np.where(index < len(edges) - 1, index, -1)  # NaN and +inf sort past the last edge


def by_length_bin(df: pd.DataFrame, edges: Sequence[float]) -> pd.DataFrame:
    """Long table `bin, metric, stat, value, unit`: BIN_METRICS described within each output-length
    bin `[edges[i], edges[i+1])`. Every bin appears (n = 0 when empty); requests outside are left out."""
    derived = derived_table(df)
    index = length_bin_index(floats(derived["completion_tokens"]), edges)
    rows = []
    for i, label in enumerate(bin_labels(edges)):
        in_bin = derived[index == i]
        for metric in BIN_METRICS:
            unit = DISTRIBUTION_UNITS[metric]
            rows += [(label, metric, stat, value, STAT_UNITS.get(stat, unit))
                     for stat, value in describe(floats(in_bin[metric])).items()]
    return pd.DataFrame(rows, columns=["bin", "metric", "stat", "value", "unit"])


def length_match_weights(run_tokens: np.ndarray, target_tokens: np.ndarray,
                         edges: Sequence[float]) -> tuple[np.ndarray, float]:
    """Histogram reweighting: per-request weights that give the run the target's length mix.

    With r_b run requests and t_b target requests in bin b, a run request in bin b gets weight
    `(t_b / T) / r_b`, T being the target requests in bins the run covers (r_b > 0): each bin then
    carries the target's share of requests, split evenly among the run's requests in it. Weights
    sum to 1. Also returns the coverage `T / target requests with a count`: below 1 the target
    has lengths the run never produced and the match is partial.
    """
    bins = len(edges) - 1
    run_index, target_index = length_bin_index(run_tokens, edges), length_bin_index(target_tokens, edges)
    run_counts = np.bincount(run_index[run_index >= 0], minlength=bins)
    target_counts = np.bincount(target_index[target_index >= 0], minlength=bins)
    covered = np.where(run_counts > 0, target_counts, 0)
    share = ratio(covered, covered.sum())
    per_request = np.nan_to_num(ratio(share, run_counts))
    weights = np.where(run_index >= 0, per_request[run_index], 0.0)
    return weights, float(ratio(covered.sum(), np.isfinite(target_tokens).sum()))


def length_matched_throughput(run_df: pd.DataFrame, target_df: pd.DataFrame,
                              edges: Sequence[float]) -> pd.DataFrame:
    """Run's speed reweighted to the target's output-length distribution; long table
    `metric, stat, value, unit` with stat "length_matched" (and `target_coverage`, stat "value").

    decode_throughput_aggregate = `sum(w * (completion_tokens - 1)) / sum(w * decode_s)`, tok/s;
    decode_throughput_mean_of_requests, tpot_ms, e2e_ms, completion_tokens: weighted means.
    Weights come from `length_match_weights`; reweighting a run to itself changes nothing.
    """
    run = derived_table(run_df)
    completion = floats(run["completion_tokens"])
    weights, coverage = length_match_weights(completion, floats(target_df["completion_tokens"]), edges)
    decode_s = run["decode_ms"].to_numpy(dtype=float) / 1000
    decoding = (completion > 1) & np.isfinite(decode_s) & (weights > 0)
    aggregate = ratio((weights * (completion - 1))[decoding].sum(), (weights * decode_s)[decoding].sum())
    values = {
        "decode_throughput_aggregate": (float(aggregate), "tok/s"),
        "decode_throughput_mean_of_requests": (weighted_mean(floats(run["decode_tok_s"]), weights), "tok/s"),
        "tpot_ms": (weighted_mean(floats(run["tpot_ms"]), weights), "ms"),
        "e2e_ms": (weighted_mean(floats(run["e2e_ms"]), weights), "ms"),
        "completion_tokens": (weighted_mean(completion, weights), "tokens"),
    }
    rows = [(metric, "length_matched", value, unit) for metric, (value, unit) in values.items()]
    rows.append(("target_coverage", "value", coverage, "fraction"))
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def _correct_count(derived: pd.DataFrame) -> int:
    """Requests whose `correct` is True (unscored rows, NA, count as not correct)."""
    return int(derived["correct"].eq(True).sum())


def tokens_per_correct_answer(derived: pd.DataFrame) -> float:
    """Output tokens spent per correct answer: `sum(completion_tokens) / correct answers`; NaN at 0."""
    return float(ratio(np.nansum(floats(derived["completion_tokens"])), _correct_count(derived)))


def seconds_per_correct_answer(derived: pd.DataFrame) -> float:
    """Request time spent per correct answer, s: `sum(e2e_ms) / 1000 / correct answers`; NaN at 0."""
    return float(ratio(np.nansum(floats(derived["e2e_ms"])) / 1000, _correct_count(derived)))


def correctness_values(derived: pd.DataFrame) -> dict[str, float]:
    """Correctness metrics (CORRECTNESS_UNITS) of a derived table with a boolean `correct` column.

    accuracy = correct answers / scored requests (rows whose `correct` is not missing).
    """
    scored = int(derived["correct"].notna().sum())
    correct = _correct_count(derived)
    return {
        "correct_answers": float(correct),
        "accuracy": correct / scored if scored else math.nan,
        "tokens_per_correct_answer": tokens_per_correct_answer(derived),
        "seconds_per_correct_answer": seconds_per_correct_answer(derived),
    }
