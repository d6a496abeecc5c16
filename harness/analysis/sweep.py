"""A sweep's analysis: throughput-latency curves, speed-up against a baseline configuration by
concurrency, and where each curve saturates. Pure functions of the sweep's long summary
(`harness.sweep.run.sweep_summary`: the cells' summary rows led by cell coordinates).

Definitions (docs/metrics.md, "Sweeps"):
- curve point of a cell: output throughput (tok/s, output tokens over the run span), TPOT p50
  (ms), E2E latency p95 (ms), TTFT p50 (ms), at the cell's concurrency;
- speed-up at concurrency c: throughput_speedup = T_cand(c) / T_base(c) - 1 and
  tpot_speedup = TPOT_base(c) / TPOT_cand(c) - 1 (positive = the candidate is faster);
- saturation: between consecutive levels c1 < c2 of one curve, throughput rose by less than
  SATURATION_MAX_GAIN (T2 / T1 - 1 < 10%) while TPOT p50 rose by at least SATURATION_MIN_LATENCY_RISE
  (L2 / L1 - 1 >= 20%); the curve saturates at the first such c1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Curve columns and the summary rows (metric, stat) they come from.
CURVE_FIGURES = {
    "output_tok_s": ("output_throughput", "value"),
    "tpot_p50_ms": ("tpot_ms", "p50"),
    "e2e_p95_ms": ("e2e_ms", "p95"),
    "ttft_p50_ms": ("ttft_ms", "p50"),
}
KEYS = ["configuration", "workload", "concurrency"]
SATURATION_MAX_GAIN = 0.10  # throughput gain below this between consecutive levels ...
SATURATION_MIN_LATENCY_RISE = 0.20  # ... while TPOT p50 rises by at least this: saturated


def curves(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: KEYS and the CURVE_FIGURES columns (NaN where a cell lacks a figure)."""
    columns = {}
    for name, (metric, stat) in CURVE_FIGURES.items():
        rows = summary[(summary["metric"] == metric) & (summary["stat"] == stat)]
        columns[name] = rows.set_index(KEYS)["value"].astype(float)
    points = pd.DataFrame(columns, columns=list(CURVE_FIGURES)).reset_index()
    if points.empty:
        return pd.DataFrame(columns=[*KEYS, *CURVE_FIGURES])
    return points.sort_values(KEYS, ignore_index=True)


def speedups(points: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each other configuration against `baseline`, per workload and concurrency level that both
    measured: throughput_speedup and tpot_speedup (fractions; see the module docstring)."""
    base = points[points["configuration"] == baseline].set_index(["workload", "concurrency"])
    rows = []
    for row in points[points["configuration"] != baseline].itertuples(index=False):
        key = (row.workload, row.concurrency)
        if key not in base.index:
            continue
        ref = base.loc[key]
        rows.append({"configuration": row.configuration, "baseline": baseline, "workload": row.workload,
                     "concurrency": row.concurrency,
                     "throughput_speedup": _ratio(row.output_tok_s, ref["output_tok_s"]) - 1,
                     "tpot_speedup": _ratio(ref["tpot_p50_ms"], row.tpot_p50_ms) - 1})
    columns = ["configuration", "baseline", "workload", "concurrency", "throughput_speedup", "tpot_speedup"]
    return pd.DataFrame(rows, columns=columns)


def saturation_steps(points: pd.DataFrame, max_gain: float = SATURATION_MAX_GAIN,
                     min_latency_rise: float = SATURATION_MIN_LATENCY_RISE) -> pd.DataFrame:
    """Every step between consecutive levels of each curve: throughput_gain = T2 / T1 - 1,
    tpot_rise = L2 / L1 - 1 (fractions), and whether the step meets the saturation rule."""
    rows = []
    for (configuration, workload), curve in points.groupby(["configuration", "workload"], sort=True):
        curve = curve.sort_values("concurrency")
        for low, high in zip(curve.itertuples(index=False), curve.iloc[1:].itertuples(index=False)):
            gain = _ratio(high.output_tok_s, low.output_tok_s) - 1
            rise = _ratio(high.tpot_p50_ms, low.tpot_p50_ms) - 1
            rows.append({"configuration": configuration, "workload": workload, "from_concurrency": low.concurrency,
                         "to_concurrency": high.concurrency, "throughput_gain": gain, "tpot_rise": rise,
                         "saturated": bool(gain < max_gain and rise >= min_latency_rise)})
    columns = ["configuration", "workload", "from_concurrency", "to_concurrency", "throughput_gain", "tpot_rise",
               "saturated"]
    return pd.DataFrame(rows, columns=columns)


def saturation_points(steps: pd.DataFrame) -> pd.DataFrame:
    """Per curve, the concurrency where it saturates (the first saturated step's lower level), or
    NaN when no measured step meets the rule."""
    rows = []
    for (configuration, workload), curve in steps.groupby(["configuration", "workload"], sort=True):
        hit = curve[curve["saturated"]]
        rows.append({"configuration": configuration, "workload": workload,
                     "saturates_at": float(hit["from_concurrency"].iloc[0]) if len(hit) else np.nan,
                     "highest_measured": int(curve["to_concurrency"].max())})
    return pd.DataFrame(rows, columns=["configuration", "workload", "saturates_at", "highest_measured"])


def saturation_sentences(found: pd.DataFrame) -> list[str]:
    """Each curve's saturation stated in words."""
    lines = []
    for row in found.itertuples(index=False):
        where = (f"saturates at concurrency {int(row.saturates_at)}" if pd.notna(row.saturates_at)
                 else f"does not saturate up to concurrency {row.highest_measured}")
        lines.append(f"{row.configuration} / {row.workload}: {where} (rule: throughput gain < "
                     f"{SATURATION_MAX_GAIN:.0%} while TPOT p50 rises >= {SATURATION_MIN_LATENCY_RISE:.0%})")
    return lines


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator; NaN when either is missing or the denominator is not positive."""
    if pd.isna(numerator) or pd.isna(denominator) or denominator <= 0:
        return np.nan
    return float(numerator) / float(denominator)
