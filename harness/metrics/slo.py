"""Service-level objectives: each request met or missed, SLO attainment and goodput.

Targets are upper limits in ms on any of `ttft`, `tpot` and `e2e` (`--slo ttft=500ms,tpot=50ms,e2e=30s`).
A request meets the SLO when it succeeded and every given figure is within its limit. TTFT and E2E
are judged as response times (from the request's due time, `harness.metrics.load`) when it had one,
else as service times (from its send): a user's wait includes the queue of a client that fell behind.
TPOT is judged per request (its decode time over its output tokens after the first); a request with
one token has no decode and meets any TPOT limit (as in SGLang's and vLLM's goodput). A figure that
could not be measured (a stream that hid its first token) misses: nothing unmeasured counts as good.

- slo_attainment = requests that met / requests recorded (a failed request missed), with a 95%
  Wilson interval; slo_attainment_<figure> the same for one figure alone;
- goodput_rps = requests that met / run_span_s; goodput_tok_s = their output tokens / run_span_s.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.stats import wilson_interval
from harness.metrics.summary import ok_requests, run_span_s
from harness.metrics.values import floats

# Figure of a target (each of `harness.slo_targets.TARGET_FIGURES`) -> (service-time column,
# response-time column or None).
SLO_FIGURES = {"ttft": ("ttft_ms", "response_ttft_ms"), "tpot": ("tpot_ms", None),
               "e2e": ("e2e_ms", "response_e2e_ms")}


def _figure(derived: pd.DataFrame, figure: str) -> np.ndarray:
    """The per-request values a target is judged on, ms: the response time where the request had a
    due time, else the service time."""
    service, response = SLO_FIGURES[figure]
    values = floats(derived[service])
    if response is None or response not in derived.columns:
        return values
    due = floats(derived["scheduled_ns"]) if "scheduled_ns" in derived.columns else np.full(len(values), np.nan)
    return np.where(np.isfinite(due), floats(derived[response]), values)


def figure_met(derived: pd.DataFrame, figure: str, limit_ms: float) -> np.ndarray:
    """Whether each request's `figure` is within `limit_ms` (a failed request: no)."""
    values = _figure(derived, figure)
    met = np.isfinite(values) & (values <= limit_ms)
    if figure == "tpot":  # one token (or none counted): no decode phase to be slow in
        met |= ~(floats(derived["completion_tokens"]) > 1)
    ok = derived["status"].fillna("ok").eq("ok").to_numpy() if "status" in derived.columns else True
    return met & ok


def slo_met(derived: pd.DataFrame, targets: dict[str, float]) -> np.ndarray:
    """Whether each request met every target (succeeded, and each figure within its limit)."""
    met = np.ones(len(derived), dtype=bool)
    for figure, limit in targets.items():
        met &= figure_met(derived, figure, limit)
    return met


def slo_values(judged: pd.DataFrame, targets: dict[str, float]) -> dict[str, dict[str, float]]:
    """{metric: {stat: value}} of the SLO metrics over `judged` (every request recorded in the
    measured window, failed ones included); the spans are those of its ok requests."""
    met = slo_met(judged, targets)
    n, good = len(met), int(met.sum())
    low, high = wilson_interval(good, n)
    span = run_span_s(ok_requests(judged))
    tokens = float(np.nansum(floats(judged["completion_tokens"])[met]))
    values = {"slo_attainment": {"mean": good / n if n else math.nan, "ci95_low": low, "ci95_high": high,
                                 "n": float(n)},
              "slo_requests_met": {"value": float(good)},
              "goodput_rps": {"value": good / span if span > 0 else math.nan},
              "goodput_tok_s": {"value": tokens / span if span > 0 else math.nan}}
    for figure in SLO_FIGURES:
        hits = figure_met(judged, figure, targets[figure]) if figure in targets else None
        values[f"slo_attainment_{figure}"] = {"value": float(hits.mean()) if hits is not None and n else math.nan}
    return values


def attainment_parts(judged: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-request (met, 1): sums give slo_attainment (for request-by-request comparisons)."""
    met = floats(judged["slo_met"]) if "slo_met" in judged.columns else np.zeros(len(judged))
    ones = np.ones(len(judged)) if "slo_met" in judged.columns else np.zeros(len(judged))
    return met, ones


def goodput_parts(judged: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-request (met, run_span_s / n): sums give goodput_rps with the span held fixed."""
    met, ones = attainment_parts(judged)
    span = run_span_s(ok_requests(judged))
    share = ones * (span / len(judged)) if len(judged) and span > 0 else np.zeros(len(judged))
    return met, share
