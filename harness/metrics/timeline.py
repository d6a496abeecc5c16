"""Pure functions of a run's records and sampled series on the client's clock (perf_counter ns).

The timeline figure and the telemetry warnings read these; each takes plain arrays or tidy frames
(`harness.records.timeseries`: t_ns, role or metric, value) and returns numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

NS_PER_S = 1e9
# NVML clock-event (throttle) reasons by bit (nvmlClocksEventReason*). Idle is the one reason that
# says nothing about the work: an idle GPU lowers its clocks by design.
GPU_IDLE = 0x1
THROTTLE_REASONS = {
    0x1: "idle", 0x2: "applications clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
    0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
    0x80: "hardware power brake", 0x100: "display clock setting",
}


def in_flight(sent_ns: np.ndarray, end_ns: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """Requests in flight at each time t: count of requests with sent_ns <= t < end_ns (requests)."""
    sent, end = np.sort(np.asarray(sent_ns, dtype=np.int64)), np.sort(np.asarray(end_ns, dtype=np.int64))
    t = np.asarray(t_ns, dtype=np.int64)
    return np.searchsorted(sent, t, side="right") - np.searchsorted(end, t, side="right")


def output_rate(chunk_ns: Sequence[Sequence[int]], chunk_tokens: Sequence[Sequence[int]],
                edges_ns: np.ndarray) -> np.ndarray:
    """Output tokens per second in each bin [edges[i], edges[i+1]): the tokens each chunk brought
    (the server's running count minus the one before it) summed over chunks arriving in the bin,
    divided by the bin's width in seconds (tok/s)."""
    arrivals = [np.asarray(ns, dtype=np.int64) for ns in chunk_ns if len(ns)]
    brought = [np.diff(np.asarray(tokens, dtype=float), prepend=0.0) for tokens in chunk_tokens if len(tokens)]
    if not arrivals:
        return np.zeros(len(edges_ns) - 1)
    tokens, _ = np.histogram(np.concatenate(arrivals), bins=edges_ns, weights=np.concatenate(brought))
    return tokens / (np.diff(edges_ns) / NS_PER_S)


def role_series(samples: pd.DataFrame, role: str) -> pd.DataFrame:
    """One role's samples (columns t_ns, value), summed over its label sets at each scrape."""
    rows = samples[samples["role"] == role]
    return rows.groupby("t_ns", as_index=False)["value"].sum().sort_values("t_ns", ignore_index=True)


def within(frame: pd.DataFrame, start_ns: int, end_ns: int) -> pd.DataFrame:
    """Rows with start_ns <= t_ns <= end_ns."""
    return frame[(frame["t_ns"] >= start_ns) & (frame["t_ns"] <= end_ns)]


def counter_increase(values: np.ndarray) -> float:
    """What a counter gained over time-ordered readings: the sum of its steps, where a step down
    is a restart from zero and adds the value after it (as Prometheus's `increase`). NaN with fewer
    than two readings."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float("nan")
    steps = np.diff(v)
    return float(np.where(steps >= 0, steps, v[1:]).sum())


def throttle_names(mask: int, ignore: int = GPU_IDLE) -> list[str]:
    """The NVML clock-event reasons set in `mask`, except those in `ignore`; unknown bits by hex."""
    names, rest = [], int(mask) & ~ignore
    for bit, name in THROTTLE_REASONS.items():
        if rest & bit:
            names.append(name)
            rest &= ~bit
    return names + ([f"0x{rest:x}"] if rest else [])


def relative_gap(value: float, reference: float) -> float:
    """`value / reference - 1` (fraction); NaN when the reference is not positive."""
    return value / reference - 1 if reference > 0 else float("nan")


def counter_rate(t_ns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(midpoints ns, per-second rate) of a counter between consecutive readings: the step's
    increase (`counter_increase` of the pair) over its seconds (units per second)."""
    t, v = np.asarray(t_ns, dtype=np.int64), np.asarray(values, dtype=float)
    if t.size < 2:
        return np.array([], dtype=np.int64), np.array([])
    steps = np.diff(v)
    gained = np.where(steps >= 0, steps, v[1:])
    return t[:-1] + np.diff(t) // 2, gained / (np.diff(t) / NS_PER_S)
