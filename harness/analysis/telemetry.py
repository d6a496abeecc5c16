"""What the sampled server metrics and GPU state say about a run: warnings and the in-flight check.

Every reading is taken over the measured requests only: from the last scrape at or before their
start (taken right there, see `harness.telemetry.sampling`) to the first at or after their end. A
run without telemetry (recorded before it existed, or with sampling off) has no warning from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.engines.registry import meta_reader
from harness.engines.series import (
    GENERATION_TOKENS,
    PREEMPTIONS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    QUEUED,
    RUNNING,
    Series,
    by_role,
)
from harness.metrics.overload import overload_warning
from harness.metrics.prefix_cache import counter_hit_rate
from harness.metrics.timeline import (
    NS_PER_S,
    counter_increase,
    in_flight,
    relative_gap,
    role_series,
    throttle_names,
)
from harness.metrics.values import floats

if TYPE_CHECKING:
    from harness.analysis.run import Run

# How far the server's own output-token count may stray from the client's before a warning: both
# count the same tokens, so only requests from another client (or a counter that lags) separate them.
THROUGHPUT_TOLERANCE = 0.05


def measured_window(run: Run) -> tuple[int, int] | None:
    """(start, end) of the measured requests on the client's clock, as the telemetry marked them."""
    telemetry = run.record.telemetry
    window = telemetry.window if telemetry else None
    if window is None or window.measured_start_ns is None or window.measured_end_ns is None:
        return None
    return window.measured_start_ns, window.measured_end_ns


def bracketing(frame: pd.DataFrame, start_ns: int, end_ns: int) -> pd.DataFrame:
    """Rows from the last t_ns at or before `start_ns` to the first at or after `end_ns`."""
    times = np.sort(frame["t_ns"].unique())
    before, after = times[times <= start_ns], times[times >= end_ns]
    low = before[-1] if before.size else start_ns
    high = after[0] if after.size else end_ns
    return frame[(frame["t_ns"] >= low) & (frame["t_ns"] <= high)]


def _series(run: Run) -> dict[str, Series]:
    return by_role(meta_reader(run.engine_and_api[0]).server_series)


def _role(run: Run, role: str) -> pd.DataFrame:
    window = measured_window(run)
    rows = role_series(run.server_metrics, role)
    return rows if window is None or rows.empty else bracketing(rows, *window)


def queue_warning(run: Run) -> str | None:
    """A batch-1 run during which the server had requests waiting: someone else was using it (an
    open loop queues its own requests: `queue_growth`)."""
    queued = _role(run, QUEUED)
    if run.concurrency != 1 or run.record.options.open_loop or queued.empty or queued["value"].max() <= 0:
        return None
    return (f"the server's queue held up to {queued['value'].max():.0f} requests during this batch-1 run "
            f"({_series(run)[QUEUED].metric}): another client was using the server")


def queue_growth(run: Run) -> tuple[float, float] | None:
    """An open loop's server queue (the queued gauge) averaged over the first and the last third of
    the scrapes in the measured window; None without the series or with fewer than 6 scrapes."""
    queued = _role(run, QUEUED)
    if not run.record.options.open_loop or len(queued) < 6:
        return None
    values = queued.sort_values("t_ns")["value"].to_numpy(dtype=float)
    third = len(values) // 3
    return float(values[:third].mean()), float(values[-third:].mean())


def preemption_warning(run: Run) -> str | None:
    """Requests preempted (a counter's increase, or a gauge above zero) during the measured requests."""
    series, rows = _series(run).get(PREEMPTIONS), _role(run, PREEMPTIONS)
    if series is None:  # no scrape in the window leaves the count NaN: no warning either
        return None
    count = counter_increase(rows["value"].to_numpy()) if series.counter else rows["value"].max()
    if not count > 0:
        return None
    how = "preempted" if series.counter else "at most, retracted at one time"
    return f"the server preempted requests during the run: {count:.0f} {how} ({series.metric}); KV cache ran short"


def throttle_warning(run: Run) -> str | None:
    """A GPU whose clocks were held down for a reason other than idling, inside the measured window."""
    window, samples = measured_window(run), run.device_samples
    reasons = samples[samples["metric"] == "throttle_reasons"]
    if window is not None:
        reasons = reasons[(reasons["t_ns"] >= window[0]) & (reasons["t_ns"] <= window[1])]
    found = []
    for gpu, rows in reasons.groupby("gpu"):
        named = [throttle_names(int(mask)) for mask in rows["value"]]
        hit = sorted({name for names in named for name in names})
        if hit:
            found.append(f"GPU {gpu}: {', '.join(hit)} in {sum(map(bool, named))} of {len(named)} samples")
    return f"the GPU throttled during the measured requests ({'; '.join(found)})" if found else None


def client_output_tokens(requests: pd.DataFrame) -> float:
    """Output tokens the client received: the server's final count, else its last running count."""
    last_counts = np.array([tokens[-1] if len(tokens) else 0 for tokens in requests["chunk_tokens"]], dtype=float)
    final = floats(requests["completion_tokens"])
    return float(np.where(np.isnan(final), last_counts, final).sum())


def throughput_warning(run: Run) -> str | None:
    """The server's own output throughput (its generation-token counter over the measured
    requests) against the client's (the records' tokens over the same time), beyond the tolerance."""
    window, rows = measured_window(run), _role(run, GENERATION_TOKENS)
    if window is None:  # fewer than two scrapes leave the server's rate NaN: no warning either
        return None
    seconds = (window[1] - window[0]) / NS_PER_S
    server = counter_increase(rows["value"].to_numpy()) / seconds
    client = client_output_tokens(run.requests) / seconds
    gap = relative_gap(server, client)
    if not abs(gap) > THROUGHPUT_TOLERANCE:
        return None
    return (f"the server's own output throughput ({server:.1f} tok/s, {_series(run)[GENERATION_TOKENS].metric}) "
            f"differs from the client's ({client:.1f} tok/s) by {gap:+.1%}, beyond the "
            f"{THROUGHPUT_TOLERANCE:.0%} tolerance: another client, or tokens the client did not see")


def server_cache_hit_rate(run: Run) -> float:
    """The server's prefix-cache hit rate over the measured requests, from its hit and query
    counters; NaN when its engine exports none or the scrapes do not bracket the requests."""
    hits, queries = _role(run, PREFIX_CACHE_HITS), _role(run, PREFIX_CACHE_QUERIES)
    return counter_hit_rate(hits["value"].to_numpy(), queries["value"].to_numpy())


def telemetry_warnings(run: Run) -> list[str]:
    """Every warning the sampled server metrics and GPU state raise for the run, and an open loop
    that overloaded its server (`harness.metrics.overload`: the queued gauge where it was sampled,
    else the records alone)."""
    return [w for w in (queue_warning(run), preemption_warning(run), throttle_warning(run),
                        throughput_warning(run), overload_warning(run.judged, queue_growth(run))) if w]


def in_flight_check(run: Run) -> pd.DataFrame:
    """At each scrape inside the measured window: the client's requests in flight and the server's
    running and queued counts (t_s from the window's start). The server's gauges may lag the
    client by up to one of its own refresh periods."""
    window = measured_window(run)
    running, queued = role_series(run.server_metrics, RUNNING), role_series(run.server_metrics, QUEUED)
    if window is None or running.empty:
        return pd.DataFrame(columns=["t_s", "client_in_flight", "server_running", "server_queued"])
    running = running[(running["t_ns"] > window[0]) & (running["t_ns"] < window[1])]
    ok = run.requests
    client = in_flight(ok["sent_ns"].astype("int64"), ok["end_ns"].astype("int64"), running["t_ns"].to_numpy())
    waiting = queued.set_index("t_ns")["value"].reindex(running["t_ns"]).fillna(0).to_numpy()
    return pd.DataFrame({"t_s": (running["t_ns"].to_numpy() - window[0]) / NS_PER_S, "client_in_flight": client,
                         "server_running": running["value"].to_numpy(), "server_queued": waiting})
