"""Signs that the server did not keep up with an open loop's offered load.

A server that keeps up completes, once its queue has filled, as many requests per second as arrive,
and its response times stay level. One that cannot completes at its own pace, its queue grows for
as long as the run lasts, and every latency figure describes a transient, not a steady state.
Two signs, each on the measured requests:
- **completions fall short**: over the second half of the arrival span (the first half lets the
  queue fill), fewer requests ended than were due, by more than COMPLETION_SHORTFALL of those due
  (in a steady state the two differ only by the change in requests in flight);
- **the queue grows**: the server's queued gauge, where it was sampled (`harness.analysis.telemetry`),
  averages more than GROWTH times (plus one request) as much over the last third of the run as over
  the first; without it, the median response TTFT of the last third of the requests (by due time) is
  more than GROWTH times that of the first third and above the first third's p90 (the typical late
  request waited longer than nine in ten early ones: a stable queue's thirds overlap far more).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.metrics.load import response_ttft_ms, scheduled
from harness.metrics.values import floats

MIN_REQUESTS = 20  # a half or a third of the run with fewer requests than this is not judged
COMPLETION_SHORTFALL = 0.2  # completions this far under the arrivals of the same half: overloaded
GROWTH = 2.0  # response TTFT rising this many times from the first third to the last: a growing queue


def completions_and_arrivals(df: pd.DataFrame) -> tuple[int, int] | None:
    """(requests that ended ok, requests due) in the second half of the arrival span, or None when
    that half holds fewer than MIN_REQUESTS arrivals."""
    due = floats(scheduled(df))
    if not np.isfinite(due).any():
        return None
    first, last = np.nanmin(due), np.nanmax(due)
    middle = (first + last) / 2
    arrived = int((due >= middle).sum())
    if arrived < MIN_REQUESTS:
        return None
    ok = (df["status"].fillna("ok") == "ok").to_numpy() if "status" in df.columns else np.ones(len(df), bool)
    end = floats(df["end_ns"])
    return int((ok & np.isfinite(due) & (end >= middle) & (end <= last)).sum()), arrived


def ttft_growth(df: pd.DataFrame) -> tuple[float, float, float] | None:
    """(median and p90 of the response TTFT of the first third, median of the last third), ms, of the
    ok requests in due order; None when a third holds fewer than MIN_REQUESTS."""
    ok = df[df["status"].fillna("ok") == "ok"] if "status" in df.columns else df
    due, ttft = floats(scheduled(ok)), response_ttft_ms(ok)
    keep = np.isfinite(due) & np.isfinite(ttft)
    ordered = ttft[keep][np.argsort(due[keep], kind="stable")]
    third = len(ordered) // 3
    if third < MIN_REQUESTS:
        return None
    first = ordered[:third]
    return float(np.median(first)), float(np.percentile(first, 90)), float(np.median(ordered[-third:]))


def overload_warning(df: pd.DataFrame, server_queue: tuple[float, float] | None = None) -> str | None:
    """A one-line warning when either sign shows (module docstring), with its figures; None when
    neither does, or the run is a closed loop or too short to judge. `server_queue` (the server's
    queued gauge averaged over the first and last third of the run, where it was sampled) stands
    for the TTFT trend: the server's own count of waiting requests is the direct reading."""
    signs = []
    counts = completions_and_arrivals(df)
    if counts is not None and counts[0] < (1 - COMPLETION_SHORTFALL) * counts[1]:
        signs.append(f"over the second half of the schedule {counts[0]} requests completed of the {counts[1]} "
                     "due")
    growth = ttft_growth(df) if server_queue is None else None
    if server_queue is not None and server_queue[1] > GROWTH * server_queue[0] + 1:
        signs.append(f"the server's queue grew from {server_queue[0]:.1f} requests waiting (mean, first third "
                     f"of the run) to {server_queue[1]:.1f} (last third)")
    if growth is not None and growth[2] > max(GROWTH * growth[0], growth[1]):
        signs.append(f"response TTFT p50 rose from {growth[0]:.1f} ms (first third of the requests) to "
                     f"{growth[2]:.1f} ms (last third)")
    if not signs:
        return None
    return (f"the server did not keep up with the load offered: {'; '.join(signs)}. Its queue grew through "
            "the run, so the latencies describe a transient, not a steady state; completed_rate_rps is what "
            "it sustained")
