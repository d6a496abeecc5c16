"""The nightly trend: each gated headline metric over past nights, the pinned baseline marked."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.nightly.gate import ACCURACIES, GATED, TAIL_FALLBACK, TAIL_QUANTILES
from harness.report.plots import new_figure, save

TREND_NAME = "nightly_trend"


def trend_series(history: pd.DataFrame, workload: str, metric: str, stat: str) -> tuple[pd.DataFrame, float | None]:
    """Candidate values night by night, and the baseline's value (None when not in the history)."""
    rows = history[(history["workload"] == workload) & (history["metric"] == metric) & (history["stat"] == stat)]
    candidate = rows[rows["role"] == "candidate"].sort_values("night")
    baseline = rows[rows["role"] == "baseline"]["value"].dropna()
    return candidate, (float(baseline.iloc[-1]) if len(baseline) else None)


def trend_plot(history: pd.DataFrame, out_dir: Path) -> list[Path]:
    """One panel per (workload, gated metric): values per night, dashed baseline, red x = regressed."""
    measured = history.dropna(subset=["value"])  # e.g. accept length of a run without speculation
    shown = [*GATED, *[(m, TAIL_FALLBACK, d) for m, s, d in GATED if s in TAIL_QUANTILES], *[(m, s, 0) for m, s in ACCURACIES]]
    panels = [(w, m, s) for w in sorted(measured["workload"].unique())
              for m, s, _ in shown
              if ((measured["workload"] == w) & (measured["metric"] == m) & (measured["stat"] == s)).any()]
    fig = new_figure(11, 2.4 * max(1, (len(panels) + 1) // 2))
    axes = fig.subplots(max(1, (len(panels) + 1) // 2), 2, squeeze=False).ravel()
    for ax, (workload, metric, stat) in zip(axes, panels):
        series, base = trend_series(history, workload, metric, stat)
        unit = series["unit"].iloc[0] if len(series) else ""
        ax.plot(series["night"], series["value"], marker="o", color="#1f77b4", label="nightly run")
        bad = series[series["verdict"].fillna("").str.startswith("regressed")]
        ax.plot(bad["night"], bad["value"], "x", color="#d62728", markersize=10, mew=2, label="regressed")
        if base is not None:
            ax.axhline(base, linestyle="--", color="#555555", label="pinned baseline")
        ax.set_title(f"{workload}: {metric} ({stat})", fontsize=9)
        ax.set_ylabel(unit)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if panels:
        axes[0].legend(fontsize=7)
    fig.suptitle("Nightly trend of the gated metrics (x axis: night, UTC)")
    return save(fig, Path(out_dir), TREND_NAME)
