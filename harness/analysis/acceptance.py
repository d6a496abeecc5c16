"""A run's acceptance per draft position: its histogram, where it came from, and its summary rows.

Per-request histograms (SGLang) are pooled over the requests that succeeded, also per category;
without them the server's per-position counters over the measured requests (vLLM) give one for the
whole run (not per request, so not per category); an engine with neither has none, and every table
and figure says "not exported".
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.metrics.acceptance import (
    counter_histogram,
    definition_values,
    pooled_histogram,
    position_table,
    position_values,
    request_histograms,
)
from harness.metrics.catalogue import CATALOGUE
from harness.records.entries import ServerCounters

PER_REQUEST = "per request (engine meta)"
COUNTERS = "server counters over the measured requests"
NOT_EXPORTED = "not exported"


@dataclass(frozen=True)
class RunHistogram:
    counts: list[float] | None  # verify steps by accepted drafts; None: not exported
    source: str  # PER_REQUEST, COUNTERS or NOT_EXPORTED


def requests_histogram(derived: pd.DataFrame) -> list[float] | None:
    """The pooled per-request histogram of these rows (None when no request has one)."""
    return pooled_histogram(request_histograms(derived)) if len(derived) else None


def run_histogram(measured: pd.DataFrame, counters: ServerCounters) -> RunHistogram:
    """The run's histogram: pooled per-request ones, else the counter delta's, else none."""
    pooled = requests_histogram(measured)
    if pooled is not None:
        return RunHistogram(pooled, PER_REQUEST)
    delta = counters.delta or {}
    from_counters = counter_histogram(delta)
    if from_counters is not None:
        return RunHistogram(from_counters, COUNTERS)
    return RunHistogram(None, NOT_EXPORTED)


def position_rows(histogram: RunHistogram) -> pd.DataFrame:
    """The summary rows (metric, stat, value, unit) of the run's histogram."""
    rows = [(metric, stat, value, CATALOGUE[metric].unit)
            for (metric, stat), value in position_values(histogram.counts).items()]
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def definition_rows(measured: pd.DataFrame) -> pd.DataFrame:
    """The summary rows (metric, stat "value", value, unit) of acceptance under each definition
    (`definition_values`) over these requests' own counts; NaN where no request speculated."""
    columns = ("accepted_draft_tokens", "verify_rounds", "proposed_draft_tokens")
    counts = [measured[c].to_numpy(dtype=float) if c in measured else [] for c in columns]
    rows = [(metric, "value", value, CATALOGUE[metric].unit) for metric, value in definition_values(*counts).items()]
    return pd.DataFrame(rows, columns=["metric", "stat", "value", "unit"])


def acceptance_rows(histogram: RunHistogram, measured: pd.DataFrame) -> pd.DataFrame:
    """The run's acceptance summary rows: the histogram's (`position_rows`), then each definition's."""
    return pd.concat([position_rows(histogram), definition_rows(measured)], ignore_index=True)


def positions_by_group(groups: list[tuple[str, list[float] | None]]) -> pd.DataFrame:
    """`position_table` of each (group, histogram), stacked with a `group` column first (a category,
    `overall`, or the run's content); a group without a histogram has no rows."""
    parts = [position_table(h).assign(group=name) for name, h in groups if h is not None]
    columns = ["group", "k", "steps", "share", "conditional", "unconditional"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)
