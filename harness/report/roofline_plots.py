"""Roofline figures: achieved decode bandwidth against the device's ceiling, for the published
ladder (from the sources' model facts) and for measured runs. Every bar states its byte count and
step time: a bandwidth without the bytes it assumes is not a measurement."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from harness.analysis.reference import ladder_rooflines
from harness.metrics.roofline import Roofline
from harness.report.plots import new_figure, save


def _bars(ax, labels: Sequence[str], rooflines: Sequence[Roofline]) -> None:
    """One bar per roofline (achieved GB/s), its ceiling as a tick above it, the figures on it."""
    top = max([r.achieved_gbps for r in rooflines] + [r.peak_gbps for r in rooflines if math.isfinite(r.peak_gbps)])
    for i, roofline in enumerate(rooflines):
        ax.bar(i, roofline.achieved_gbps, color="#1f77b4", width=0.6)
        if math.isfinite(roofline.peak_gbps):
            ax.hlines(roofline.peak_gbps, i - 0.4, i + 0.4, color="#d62728", lw=2.5)
            ax.text(i, roofline.peak_gbps, f"ceiling {roofline.peak_gbps:g} GB/s", ha="center", va="bottom",
                    fontsize=8, color="#d62728")
            share = f" ({roofline.achieved_gbps / roofline.peak_gbps:.0%})"
        else:
            share = " (no known ceiling)"
        ax.text(i, roofline.achieved_gbps, f"{roofline.achieved_gbps:.1f} GB/s{share}\n"
                f"{roofline.bytes_per_step / 1e9:.3g} GB / {roofline.step_ms:.4g} ms", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(0, top * 1.2)
    ax.set_ylabel("achieved GB/s = bytes per step / time per step")
    ax.grid(axis="y", alpha=0.3)


def plot_published_roofline(out_dir: Path) -> list[Path]:
    """The published ladder's non-speculative steps against DGX Spark's 273 GB/s."""
    steps = ladder_rooflines()
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    _bars(ax, [label for _, label, _ in steps], [r for _, _, r in steps])
    ax.set_title("Decode roofline of the published ladder, Ling-3.0-flash on one DGX Spark, batch 1\n"
                 "bytes from the sources' model facts (5.1 B active, 8 of 512 experts + 1 shared, 157,184 x 2,560 "
                 "head); KV cache not counted", fontsize=10)
    fig.supxlabel("Derived, not measured: step time = published TPOT (or 1000 / published tok/s) x bytes assumed "
                  "(MXFP4 weights, BF16 router; head BF16, then FP8).\nMTP step left out: how many experts its "
                  "4-position verification reads is not published.", fontsize=8)
    return save(fig, out_dir, "published_roofline")


def plot_run_roofline(labels: Sequence[str], rooflines: Sequence[Roofline | None], out_dir: Path) -> list[Path]:
    """Measured runs that have a roofline (a model config and a plain decode step with a measured
    step time: a run with no ok request has none); none: no figure."""
    kept = [(label, r) for label, r in zip(labels, rooflines) if r is not None and math.isfinite(r.achieved_gbps)]
    if not kept:
        return []
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    _bars(ax, [label for label, _ in kept], [r for _, r in kept])
    ax.set_title("Decode roofline per run: achieved bandwidth (weights + KV cache per step / measured step time) "
                 "against the device ceiling", fontsize=10)
    return save(fig, out_dir, "run_roofline")
