"""The run summary: one long table of `run_id, workload, metric, stat, value, unit` rows.

Distribution metrics get stats n, mean, std, min, p50, p90, p95, p99, max and the flags
p95_certified / p99_certified; run-level metrics get one row with stat "value".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.engines.base import ERROR_KINDS
from harness.metrics.derive import derive_requests
from harness.metrics.integrity import flag_counts
from harness.metrics.load import in_measured_window, load_values
from harness.metrics.normalize import correctness_values
from harness.metrics.prefix_cache import prefix_cache_hit_rate
from harness.metrics.schema import CORRECTNESS_UNITS, DISTRIBUTION_UNITS, RUN_UNITS, STAT_UNITS, SUMMARY_COLUMNS
from harness.metrics.speculative import accept_length_request_weighted, accept_length_token_weighted
from harness.metrics.stats import certification, describe
from harness.metrics.values import elapsed_ms, floats, ratio

POOLED = {"itl_ms": "itl_ms", "chunk_gap_ms": "chunk_gaps_ms"}  # summary metric: per-request list column


def distribution_samples(derived: pd.DataFrame, metric: str) -> np.ndarray:
    """The samples of one distribution metric: a per-request column, or for `itl_ms` (one value
    per token) and `chunk_gap_ms` (one per chunk gap) the lists of every request pooled together."""
    if metric in POOLED:
        lists = [np.asarray(cell, dtype=float) for cell in derived[POOLED[metric]]]
        return np.concatenate(lists) if lists else np.empty(0)
    return floats(derived[metric])


def run_span_s(derived: pd.DataFrame) -> float:
    """Run span, s: `max(end_ns) - min(sent_ns)`, first request sent to last `[DONE]` received."""
    if derived.empty:
        return math.nan
    span_ms = elapsed_ms(pd.Series([derived["end_ns"].max()]), pd.Series([derived["sent_ns"].min()]))
    return float(span_ms[0]) / 1000


def output_throughput(derived: pd.DataFrame) -> float:
    """Output throughput, tok/s: `sum(completion_tokens) / run_span_s`."""
    return float(ratio(np.nansum(floats(derived["completion_tokens"])), run_span_s(derived)))


def decode_throughput_parts(derived: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the numerator and denominator of `decode_throughput_aggregate`:
    (completion_tokens - 1, decode_ms / 1000), both 0 for a request with fewer than two tokens or no
    decode time. Compare resamples these pairs for its interval."""
    completion, decode = floats(derived["completion_tokens"]), derived["decode_ms"].to_numpy(dtype=float)
    keep = (completion > 1) & np.isfinite(decode)
    return np.where(keep, completion - 1, 0.0), np.where(keep, decode / 1000, 0.0)


def decode_throughput_aggregate(derived: pd.DataFrame) -> float:
    """Pooled decode rate, tok/s: `sum(completion_tokens - 1) / sum(decode_ms / 1000)` over requests
    with at least two tokens. Long requests weigh in proportion to their decode time."""
    tokens, seconds = decode_throughput_parts(derived)
    return float(ratio(tokens.sum(), seconds.sum()))


def decode_throughput_mean_of_requests(derived: pd.DataFrame) -> float:
    """Mean of per-request `decode_tok_s`, tok/s: every request weighs the same."""
    return describe(derived["decode_tok_s"].to_numpy(dtype=float))["mean"]


def run_values(derived: pd.DataFrame) -> dict[str, float]:
    """Every run-level metric (RUN_UNITS) of a derived table."""
    return {
        "run_span_s": run_span_s(derived),
        "output_throughput": output_throughput(derived),
        "decode_throughput_aggregate": decode_throughput_aggregate(derived),
        "decode_throughput_mean_of_requests": decode_throughput_mean_of_requests(derived),
        "accept_length_request_weighted": accept_length_request_weighted(derived),
        "accept_length_token_weighted": accept_length_token_weighted(derived),
        "prefix_cache_hit_rate": prefix_cache_hit_rate(derived),
        **flag_counts(derived),
    }


def ok_requests(df: pd.DataFrame) -> pd.DataFrame:
    """The requests that succeeded (`status` ok; a table without the column is all ok)."""
    if "status" not in df.columns:
        return df
    return df[df["status"].fillna("ok") == "ok"].reset_index(drop=True)


def with_failed_incorrect(df: pd.DataFrame) -> pd.DataFrame:
    """The table with `correct` False on failed requests: a question not answered is not correct."""
    if "status" not in df.columns:
        return df
    return df.assign(correct=df["correct"].where(df["status"].fillna("ok") == "ok", False))


def outcome_values(df: pd.DataFrame) -> dict[str, float]:
    """requests (all recorded), requests_ok, requests_failed, error_rate = failed / requests, and
    `errors_<kind>` for every kind of ERROR_KINDS (0 when none)."""
    status = df["status"].fillna("ok") if "status" in df.columns else pd.Series(["ok"] * len(df))
    kinds = df["error_kind"] if "error_kind" in df.columns else pd.Series([None] * len(df))
    failed = int((status != "ok").sum())
    counts = kinds[status != "ok"].value_counts()
    return {"requests": float(len(df)), "requests_ok": float(len(df) - failed), "requests_failed": float(failed),
            "error_rate": failed / len(df) if len(df) else math.nan,
            **{f"errors_{kind}": float(counts.get(kind, 0)) for kind in ERROR_KINDS}}


def distribution_rows(metric: str, samples: np.ndarray, unit: str) -> list[tuple[str, str, float, str]]:
    """(metric, stat, value, unit) rows of one distribution: stats, then the certification flags."""
    stats = describe(samples)
    stats |= certification(stats["n"])
    return [(metric, stat, value, STAT_UNITS.get(stat, unit)) for stat, value in stats.items()]


def summarize(df: pd.DataFrame, run_id: str, workload: str) -> pd.DataFrame:
    """The run summary long table (SUMMARY_COLUMNS) of one run's request table.

    Timing, throughput and speculative figures come from the ok requests only; the outcome rows
    (`outcome_values`) count every request. Correctness metrics are added when the table has a
    `correct` column (a failed request is not correct: it counts in the denominator).
    """
    return summarize_derived(derive_requests(df), run_id, workload)


def summarize_derived(derived: pd.DataFrame, run_id: str, workload: str) -> pd.DataFrame:
    """`summarize` of a table `derive_requests` already made; an open-loop run's requests outside its
    measured window (warm-up, cool-down) are left out."""
    everything = in_measured_window(derived)
    outcomes, derived = outcome_values(everything), ok_requests(everything)
    rows = []
    for metric, unit in DISTRIBUTION_UNITS.items():
        rows += distribution_rows(metric, distribution_samples(derived, metric), unit)
    scalars = [(outcomes, RUN_UNITS), (run_values(derived) | load_values(everything), RUN_UNITS)]
    if "correct" in everything.columns:
        scalars.append((correctness_values(with_failed_incorrect(everything)), CORRECTNESS_UNITS))
    for values, units in scalars:
        rows += [(metric, "value", value, units[metric]) for metric, value in values.items()]
    table = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS[2:]))
    table.insert(0, "workload", workload)
    table.insert(0, "run_id", run_id)
    return table
