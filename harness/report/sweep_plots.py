"""Figures of a sweep: throughput-latency curves and speed-up by concurrency, each as PNG and SVG.

Inputs are the tables of `harness.analysis.sweep` (curve points, speed-ups); one line per
configuration and workload, each point labelled with its concurrency.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.records.rundir import SCALE_LABEL
from harness.report.plots import new_figure, save
from harness.report.rate_plots import RATE_CAPTIONS

CAPTIONS = {
    "sweep_throughput_vs_tpot": "Output throughput against TPOT p50, one point per cell (concurrency marked)",
    "sweep_throughput_vs_e2e": "Output throughput against E2E latency p95, one point per cell (concurrency marked)",
    "sweep_speedup": "Speed-up over the baseline configuration by concurrency (output throughput and TPOT p50)",
    **RATE_CAPTIONS,
}


def _footnote(fig, reduced: bool) -> None:
    if reduced:
        fig.supxlabel(SCALE_LABEL, fontsize=8, color="#a00000")


def plot_curve(points: pd.DataFrame, latency: str, label: str, name: str, out_dir: Path,
               reduced: bool) -> list[Path]:
    """Output tok/s (y) against the `latency` column (x), one line per configuration / workload."""
    fig = new_figure(7, 4.5)
    ax = fig.add_subplot()
    for (configuration, workload), curve in points.groupby(["configuration", "workload"], sort=True):
        curve = curve.sort_values("concurrency")
        ax.plot(curve[latency], curve["output_tok_s"], marker="o", label=f"{configuration} / {workload}")
        for row in curve.itertuples(index=False):
            ax.annotate(f"c={row.concurrency}", (getattr(row, latency), row.output_tok_s), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(label)
    ax.set_ylabel("output throughput (tok/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _footnote(fig, reduced)
    return save(fig, out_dir, name)


def plot_speedup(speedups: pd.DataFrame, out_dir: Path, reduced: bool) -> list[Path]:
    """Throughput and TPOT speed-up (percent) against concurrency, one line per configuration / workload."""
    if speedups.empty:
        return []
    fig = new_figure(7, 4.5)
    ax = fig.add_subplot()
    for (configuration, workload), rows in speedups.groupby(["configuration", "workload"], sort=True):
        rows = rows.sort_values("concurrency")
        base = rows["baseline"].iloc[0]
        ax.plot(rows["concurrency"], rows["throughput_speedup"] * 100, marker="o",
                label=f"{configuration} vs {base} / {workload}: output tok/s")
        ax.plot(rows["concurrency"], rows["tpot_speedup"] * 100, marker="s", linestyle="--",
                label=f"{configuration} vs {base} / {workload}: TPOT p50")
    ax.axhline(0, color="#555", linewidth=0.8)
    ax.set_xscale("log", base=2)
    levels = sorted(speedups["concurrency"].unique())
    ax.set_xticks(levels, [str(level) for level in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency")
    ax.set_ylabel("speed-up over the baseline (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _footnote(fig, reduced)
    return save(fig, out_dir, "sweep_speedup")


def plot_sweep(points: pd.DataFrame, speedups: pd.DataFrame, out_dir: Path, reduced: bool) -> list[Path]:
    """Every sweep figure written into out_dir; nothing when no cell has a curve point."""
    if points.empty:
        return []
    return [*plot_curve(points, "tpot_p50_ms", "TPOT p50 (ms)", "sweep_throughput_vs_tpot", out_dir, reduced),
            *plot_curve(points, "e2e_p95_ms", "E2E latency p95 (ms)", "sweep_throughput_vs_e2e", out_dir, reduced),
            *plot_speedup(speedups, out_dir, reduced)]
