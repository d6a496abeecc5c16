"""Open-loop load: the lag behind the arrival schedule, response times, offered and achieved rates.

An open-loop record keeps the time its request was due (`scheduled_ns`, from the arrival schedule)
beside the client's own send stamp (`sent_ns`). Latencies from `sent_ns` are service times (what the
server took); latencies from `scheduled_ns` are response times (what a user who arrived on schedule
waited, queueing in a client that fell behind included). Measuring only service times from a client
that cannot keep up hides the wait ("coordinated omission"); the lag says how far behind it was.
A closed-loop record has no due time: every figure here is NaN ("not measured") for it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.metrics.stats import describe
from harness.metrics.values import elapsed_ms, floats

MEASURED = "measured"  # the window of a request that counts (others: warmup, cooldown)
LAG_WARNING_MS = 10.0  # a request sent this much after its due time is late ...
LAG_WARNING_SHARE = 0.05  # ... and a run with more than this share of late requests fell behind
RATE_SHORTFALL = 0.02  # a send rate this far under the offered one is a lighter load than asked


def scheduled(df: pd.DataFrame) -> pd.Series:
    """The due times (perf_counter ns), missing for closed-loop records and tables written before them."""
    if "scheduled_ns" in df.columns:
        return df["scheduled_ns"]
    return pd.Series([None] * len(df), index=df.index, dtype="Int64")


def send_lag_ms(df: pd.DataFrame) -> np.ndarray:
    """Send lag, ms: `sent_ns - scheduled_ns`, how late the client sent each request."""
    return elapsed_ms(df["sent_ns"], scheduled(df))


def response_ttft_ms(df: pd.DataFrame) -> np.ndarray:
    """Response time to the first token, ms: `first_token_ns - scheduled_ns` (= send lag + ttft_ms)."""
    return elapsed_ms(df["first_token_ns"], scheduled(df))


def response_e2e_ms(df: pd.DataFrame) -> np.ndarray:
    """Response time of the whole request, ms: `end_ns - scheduled_ns` (= send lag + e2e_ms)."""
    return elapsed_ms(df["end_ns"], scheduled(df))


def load_columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """The per-request open-loop columns, keyed by name."""
    return {"send_lag_ms": send_lag_ms(df), "response_ttft_ms": response_ttft_ms(df),
            "response_e2e_ms": response_e2e_ms(df)}


def in_measured_window(df: pd.DataFrame) -> pd.DataFrame:
    """The rows whose `window` is `measured`; a table without windows (closed loop) is all measured."""
    if "window" not in df.columns:
        return df
    return df[df["window"].fillna(MEASURED) == MEASURED].reset_index(drop=True)


def _rate(stamps: np.ndarray) -> float:
    """`(n - 1) / (last - first)` in 1/s for ns stamps; NaN below two stamps or over no time."""
    stamps = stamps[np.isfinite(stamps)]
    if len(stamps) < 2 or stamps.max() <= stamps.min():
        return math.nan
    return (len(stamps) - 1) / ((stamps.max() - stamps.min()) / 1e9)


def offered_rate_rps(df: pd.DataFrame) -> float:
    """Offered rate, requests/s: `(n - 1) / (last scheduled_ns - first scheduled_ns)`, the rate of the
    schedule the requests were due on (a drawn schedule's own rate, not the asked mean)."""
    return _rate(floats(scheduled(df)))


def achieved_rate_rps(df: pd.DataFrame) -> float:
    """Achieved rate, requests/s: `(n - 1) / (last sent_ns - first sent_ns)` over the requests that
    had a due time: the rate the client really sent at."""
    due = floats(scheduled(df))
    return _rate(np.where(np.isfinite(due), floats(df["sent_ns"]), np.nan))


def completed_rate_rps(df: pd.DataFrame) -> float:
    """Completion rate, requests/s: ok requests / (last end_ns - first sent_ns of the ok requests),
    SGLang's and vLLM's request throughput (completed / duration). A server that keeps up completes
    about what was offered; one that does not completes at its own pace while its queue grows."""
    ok = df[df["status"].fillna("ok") == "ok"] if "status" in df.columns else df
    sent, end = floats(ok["sent_ns"]), floats(ok["end_ns"])
    if not len(ok) or not np.isfinite(end).any() or np.nanmax(end) <= np.nanmin(sent):
        return math.nan
    return len(ok) / ((np.nanmax(end) - np.nanmin(sent)) / 1e9)


def load_values(df: pd.DataFrame) -> dict[str, float]:
    """offered_rate_rps, achieved_rate_rps, requests_late (requests sent more than LAG_WARNING_MS
    after their due time; these three NaN for a closed loop) and completed_rate_rps (any run)."""
    lag = send_lag_ms(df)
    late = float((lag > LAG_WARNING_MS).sum()) if np.isfinite(lag).any() else math.nan
    return {"offered_rate_rps": offered_rate_rps(df), "achieved_rate_rps": achieved_rate_rps(df),
            "completed_rate_rps": completed_rate_rps(df), "requests_late": late}


def lag_warning(df: pd.DataFrame) -> str | None:
    """A one-line warning when the client fell behind its schedule (more than LAG_WARNING_SHARE of
    the requests sent over LAG_WARNING_MS late, whether the client was slow or --max-concurrency
    held them back), with the lag distribution; None when it kept up or had no schedule."""
    lag = send_lag_ms(df)
    lag = lag[np.isfinite(lag)]
    late = int((lag > LAG_WARNING_MS).sum())
    if not len(lag) or late <= LAG_WARNING_SHARE * len(lag):
        return None
    stats = describe(lag)
    return (f"the client fell behind its arrival schedule: {late} of {len(lag)} requests sent more than "
            f"{LAG_WARNING_MS:g} ms late (send lag p50 {stats['p50']:.1f} ms, p90 {stats['p90']:.1f} ms, "
            f"p99 {stats['p99']:.1f} ms, max {stats['max']:.1f} ms); {_lag_effect(df)}")


def _lag_effect(df: pd.DataFrame) -> str:
    """What the lag did to the load: a lighter one only when fewer were sent per second than offered."""
    offered, achieved = offered_rate_rps(df), achieved_rate_rps(df)
    if achieved < (1 - RATE_SHORTFALL) * offered:
        return (f"the load sent ({achieved:.3g} req/s) was lighter than offered ({offered:.3g} req/s), and "
                "response times (from the due time) exceed service times")
    return (f"the rate held ({achieved:.3g} req/s sent, {offered:.3g} offered), but response times (from the "
            "due time) exceed service times by the lag")
