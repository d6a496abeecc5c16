"""Open-loop runs side by side by offered rate: one point per run, per configuration and workload.
Pure functions of a long summary whose rows are led by `configuration`, `workload` and
`request_rate` (the rate asked for; a sweep's rate cells, or a capacity search's trials).

A point: the rate asked, the offered rate (of the schedule drawn), the achieved rate (of the
actual sends), the completed rate (ok requests over first send to last end), response TTFT and
E2E p50 and p95 (from the due time), TPOT p50, output throughput, goodput (requests/s and output tokens/s meeting every SLO target) and SLO attainment with its 95%
interval; a figure the run did not measure (no SLO given) is NaN, shown as not measured.
"""

from __future__ import annotations

import pandas as pd

RATE_KEYS = ["configuration", "workload", "request_rate"]
RATE_FIGURES = {
    "offered_rps": ("offered_rate_rps", "value"),
    "achieved_rps": ("achieved_rate_rps", "value"),
    "completed_rps": ("completed_rate_rps", "value"),
    "response_ttft_p50_ms": ("response_ttft_ms", "p50"),
    "response_ttft_p95_ms": ("response_ttft_ms", "p95"),
    "response_e2e_p50_ms": ("response_e2e_ms", "p50"),
    "response_e2e_p95_ms": ("response_e2e_ms", "p95"),
    "tpot_p50_ms": ("tpot_ms", "p50"),
    "output_tok_s": ("output_throughput", "value"),
    "goodput_rps": ("goodput_rps", "value"),
    "goodput_tok_s": ("goodput_tok_s", "value"),
    "slo_attainment": ("slo_attainment", "mean"),
    "slo_ci95_low": ("slo_attainment", "ci95_low"),
    "slo_ci95_high": ("slo_attainment", "ci95_high"),
}


def rate_points(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per run: RATE_KEYS and the RATE_FIGURES columns (NaN where a run lacks a figure),
    sorted by configuration, workload and rate."""
    columns = {}
    for name, (metric, stat) in RATE_FIGURES.items():
        rows = summary[(summary["metric"] == metric) & (summary["stat"] == stat)]
        columns[name] = rows.set_index(RATE_KEYS)["value"].astype(float)
    points = pd.DataFrame(columns, columns=list(RATE_FIGURES)).reset_index()
    if points.empty:
        return pd.DataFrame(columns=[*RATE_KEYS, *RATE_FIGURES])
    return points.sort_values(RATE_KEYS, ignore_index=True)


def attainment_crossing(points: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per configuration and workload, where attainment crosses `target` along the measured rates:
    the highest rate at or above it below the lowest rate under it (`last_meeting`, `first_missing`;
    NaN where every rate met it, or none did)."""
    rows = []
    for (configuration, workload), curve in points.groupby(["configuration", "workload"], sort=True):
        curve = curve.sort_values("request_rate")
        missing = curve[curve["slo_attainment"] < target]
        first_missing = float(missing["request_rate"].iloc[0]) if len(missing) else float("nan")
        below = curve[(curve["slo_attainment"] >= target) & ~(curve["request_rate"] >= first_missing)]
        rows.append({"configuration": configuration, "workload": workload,
                     "last_meeting": float(below["request_rate"].iloc[-1]) if len(below) else float("nan"),
                     "first_missing": first_missing})
    return pd.DataFrame(rows, columns=["configuration", "workload", "last_meeting", "first_missing"])
