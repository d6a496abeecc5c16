"""Figures of open-loop runs by offered rate (`harness.analysis.rates`), each as PNG and SVG: the
achieved rate against the offered one, response latency percentiles, goodput and SLO attainment,
one line per configuration and workload (speculative and plain on one figure show where a
speed-up fades); and a capacity search's trials with its bracket.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.records.rundir import SCALE_LABEL
from harness.report.plots import new_figure, save

RATE_CAPTIONS = {
    "rate_achieved": "Sent and completed against offered arrival rate (sent on the diagonal: the client kept its "
                     "schedule; completed below it: the server did not keep up)",
    "rate_latency": "Response TTFT and E2E (from the scheduled send) p50 and p95, and TPOT p50, by offered rate",
    "rate_goodput": "Goodput (requests/s meeting every SLO target) and SLO attainment with 95% intervals, "
                    "by offered rate",
    "capacity_trials": "SLO attainment of each capacity-search run, the target, and the bracket found",
}
NOT_MEASURED = "not measured: the runs had no SLO targets"


def _curves(points: pd.DataFrame):
    for (configuration, workload), curve in points.groupby(["configuration", "workload"], sort=True):
        yield f"{configuration} / {workload}", curve.sort_values("request_rate")


def _finish(fig, ax, xlabel: str, ylabel: str, reduced: bool) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    if reduced:
        fig.supxlabel(SCALE_LABEL, fontsize=8, color="#a00000")


def plot_achieved(points: pd.DataFrame, out_dir: Path, reduced: bool) -> list[Path]:
    fig = new_figure(6, 4.5)
    ax = fig.add_subplot()
    top = float(np.nanmax(points[["request_rate", "achieved_rps"]].to_numpy(dtype=float)))
    ax.plot([0, top], [0, top], color="#999", linewidth=0.8, linestyle=":", label="achieved = offered")
    for name, curve in _curves(points):
        line, = ax.plot(curve["request_rate"], curve["achieved_rps"], marker="o", label=f"{name} sent")
        ax.plot(curve["request_rate"], curve["completed_rps"], marker="s", linestyle="--", color=line.get_color(),
                label=f"{name} completed")
    _finish(fig, ax, "offered rate, asked (req/s)", "sent and completed rate (req/s)", reduced)
    return save(fig, out_dir, "rate_achieved")


def plot_latency(points: pd.DataFrame, out_dir: Path, reduced: bool) -> list[Path]:
    fig = new_figure(12, 4)
    panels = (("response TTFT (ms)", "response_ttft"), ("response E2E (ms)", "response_e2e"), ("TPOT p50 (ms)", None))
    for index, (label, stem) in enumerate(panels):
        ax = fig.add_subplot(1, 3, index + 1)
        for name, curve in _curves(points):
            if stem is None:
                ax.plot(curve["request_rate"], curve["tpot_p50_ms"], marker="o", label=name)
                continue
            line, = ax.plot(curve["request_rate"], curve[f"{stem}_p50_ms"], marker="o", label=f"{name} p50")
            ax.plot(curve["request_rate"], curve[f"{stem}_p95_ms"], marker="s", linestyle="--",
                    color=line.get_color(), label=f"{name} p95")
        _finish(fig, ax, "offered rate (req/s)", label, reduced and index == 0)
    return save(fig, out_dir, "rate_latency")


def plot_goodput(points: pd.DataFrame, out_dir: Path, reduced: bool, target: float | None) -> list[Path]:
    fig = new_figure(10, 4)
    good, share = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for name, curve in _curves(points):
        good.plot(curve["request_rate"], curve["goodput_rps"], marker="o", label=name)
        errors = [(curve["slo_attainment"] - curve["slo_ci95_low"]).clip(lower=0),  # as in plot_capacity
                  (curve["slo_ci95_high"] - curve["slo_attainment"]).clip(lower=0)]
        share.errorbar(curve["request_rate"], curve["slo_attainment"], yerr=errors, marker="o", capsize=3, label=name)
    if points["slo_attainment"].isna().all():
        for ax in (good, share):
            ax.text(0.5, 0.5, NOT_MEASURED, ha="center", va="center", transform=ax.transAxes, color="#777")
    if target is not None:
        share.axhline(target, color="#a00000", linewidth=0.8, linestyle="--", label=f"target {target:.0%}")
    _finish(fig, good, "offered rate (req/s)", "goodput (req/s meeting the SLO)", reduced)
    _finish(fig, share, "offered rate (req/s)", "SLO attainment", False)
    return save(fig, out_dir, "rate_goodput")


def plot_rates(points: pd.DataFrame, out_dir: Path, reduced: bool, target: float | None = None) -> list[Path]:
    """Every by-rate figure; nothing when there is no point."""
    if points.empty:
        return []
    return [*plot_achieved(points, out_dir, reduced), *plot_latency(points, out_dir, reduced),
            *plot_goodput(points, out_dir, reduced, target)]


def plot_capacity(trials: pd.DataFrame, bracket: tuple[float, float], target: float, out_dir: Path,
                  reduced: bool) -> list[Path]:
    """Each trial's attainment (interval bars, marked by role) against the rate it offered (the rate
    asked where that was not measured); the target line and the bracket shaded."""
    fig = new_figure(7, 4.5)
    ax = fig.add_subplot()
    offered = trials["offered_rps"].astype(float) if "offered_rps" in trials else pd.Series(math.nan, trials.index)
    trials = trials.assign(offered=offered.fillna(trials["rate"]))
    for role, rows in trials.groupby("role", sort=False):
        # clipped at 0: an interval's end rounds a hair past the point at 0% or 100%
        errors = [(rows["attainment"] - rows["ci95_low"]).clip(lower=0),
                  (rows["ci95_high"] - rows["attainment"]).clip(lower=0)]
        ax.errorbar(rows["offered"], rows["attainment"], yerr=errors, marker="o", linestyle="none", capsize=3, label=role)
    ax.axhline(target, color="#a00000", linewidth=0.8, linestyle="--", label=f"target {target:.1%}")
    low, high = bracket
    if math.isfinite(low) and math.isfinite(high):
        ax.axvspan(low, high, color="#2ca02c", alpha=0.15, label=f"bracket [{low:.3g}, {high:.3g}] req/s")
    ax.set_xscale("log")
    _finish(fig, ax, "offered rate (req/s)", "SLO attainment", reduced)
    return save(fig, out_dir, "capacity_trials")
