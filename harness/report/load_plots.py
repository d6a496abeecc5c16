"""The open-loop figure of a report's runs: each request's service and response time by its due
time, with the warm-up and cool-down windows shaded (their requests are left out of the figures
of the summary). Nothing for a closed-loop run, which has no due times.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.analysis.run import Run
from harness.metrics.values import floats
from harness.records.rundir import SCALE_LABEL
from harness.report.plots import new_figure, save

LOAD_CAPTIONS = {
    "open_loop_timeline": "Open loop: each request's E2E from its send (service) and from its due time (response), "
                          "by due time; warm-up and cool-down windows shaded and left out of the summary",
}
WINDOW_COLORS = {"warmup": "#ff7f0e", "cooldown": "#9467bd"}


def _open_loop(run: Run) -> bool:
    return "scheduled_ns" in run.derived.columns and run.derived["scheduled_ns"].notna().any()


def plot_timeline(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """One panel per open-loop run: service and response E2E (ms) against due time (s from the first)."""
    shown = [run for run in runs if _open_loop(run)]
    if not shown:
        return []
    fig = new_figure(10, 3.2 * len(shown))
    for index, run in enumerate(shown):
        ax = fig.add_subplot(len(shown), 1, index + 1)
        rows = run.derived[run.derived["status"].fillna("ok") == "ok"]
        due = floats(rows["scheduled_ns"])
        due_s = (due - np.nanmin(floats(run.derived["scheduled_ns"]))) / 1e9
        ax.scatter(due_s, rows["e2e_ms"], s=6, label="service E2E (from the send)")
        ax.scatter(due_s, rows["response_e2e_ms"], s=6, marker="x", label="response E2E (from the due time)")
        windows = run.derived["window"].fillna("measured") if "window" in run.derived.columns else None
        for name, color in WINDOW_COLORS.items():
            marked = due_s[(windows.loc[rows.index] == name).to_numpy()] if windows is not None else []
            if len(marked):
                ax.axvspan(float(np.min(marked)), float(np.max(marked)), color=color, alpha=0.15,
                           label=f"{name} window (left out)")
        ax.set_title(run.caption, fontsize=9)
        ax.set_xlabel("due time (s from the first request)")
        ax.set_ylabel("E2E (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if any(run.reduced_scale for run in shown):
        fig.supxlabel(SCALE_LABEL, fontsize=8, color="#a00000")
    return save(fig, out_dir, "open_loop_timeline")
