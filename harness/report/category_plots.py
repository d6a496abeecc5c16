"""Figures of where speculation pays: speed-up and accept length per task, acceptance by draft
position, and accept length along the output (PNG and SVG, as `harness.report.plots`).

A figure that was not measured says so in its panel ("not exported", "not measured") instead of
drawing a zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.acceptance import requests_histogram
from harness.analysis.categories import OVERALL, categories, has_categories
from harness.analysis.run import Run
from harness.metrics.acceptance import acceptance_by_position
from harness.metrics.along_output import accept_length_by_position
from harness.report.plots import _color, _footnote, new_figure, save

NOT_EXPORTED = "not exported: the engine reports no acceptance per position"
NOT_MEASURED_ALONG = "not measured: no request streamed one chunk per verify step"


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555", wrap=True)


def plot_task_speedups(entries: Sequence[tuple[Run, pd.DataFrame, pd.DataFrame]], out_dir) -> list:
    """Two panels per task (Spec-Bench's six, and GSM8K or synthetic when their runs are given):
    the speed-up against the plain baseline (Spec-Bench's as bars with their 95% paired intervals,
    the aggregate one as a diamond), and the token-weighted accept length. `entries`: (speculative
    run, its category_speedups, its category_table)."""
    if not entries:
        return []
    tasks = list(dict.fromkeys(c for _, speedups, _ in entries for c in speedups["category"] if c != OVERALL))
    fig = new_figure(11, 4.2)
    speed_ax, accept_ax = fig.subplots(1, 2)
    width = 0.8 / len(entries)
    x = np.arange(len(tasks))
    for i, (run, speedups, table) in enumerate(entries):
        offset = x - 0.4 + width * (i + 0.5)
        by = speedups.set_index(["category", "metric"])
        mean = [by["value"].get((t, "speedup_mean_of_requests"), np.nan) for t in tasks]
        low = [by["ci95_low"].get((t, "speedup_mean_of_requests"), np.nan) for t in tasks]
        high = [by["ci95_high"].get((t, "speedup_mean_of_requests"), np.nan) for t in tasks]
        aggregate = [by["value"].get((t, "speedup_aggregate"), np.nan) for t in tasks]
        # A point interval can sit a rounding error off its point: never a negative error bar.
        errors = np.clip(np.nan_to_num([np.subtract(mean, low), np.subtract(high, mean)], nan=0.0), 0.0, None)
        speed_ax.bar(offset, mean, width, yerr=errors, color=_color(i), label=run.caption, capsize=3)
        speed_ax.scatter(offset, aggregate, marker="D", color="black", s=14, zorder=3)
        accept = table[table["metric"] == "accept_length_token_weighted"].set_index("category")["value"]
        accept_ax.bar(offset, [accept.get(t, np.nan) for t in tasks], width, color=_color(i), label=run.caption)
    speed_ax.axhline(1.0, color="#555", linewidth=0.8)
    speed_ax.set(title="Speed-up against the plain baseline (◆ aggregate)", ylabel="speed-up (x)")
    accept_ax.set(title="Accept length (token-weighted)", ylabel="tokens per verify round")
    for ax in (speed_ax, accept_ax):
        ax.set_xticks(x, tasks, rotation=30, ha="right")
    speed_ax.legend(fontsize=7)
    _footnote(fig, [run for run, _, _ in entries])
    return save(fig, out_dir, "task_speedup")


def _position_line(ax, histogram, label: str, color: str, style: str = "-") -> bool:
    rates = acceptance_by_position(histogram) if histogram else []
    if not rates:
        return False
    ax.plot(range(1, len(rates) + 1), rates, style, marker="o", color=color, label=label)
    return True


def plot_acceptance_by_position(runs: Sequence[Run], out_dir) -> list:
    """Per run: the acceptance rate at each draft position (solid), and per category where the
    engine reports it per request (thin); "not exported" where the engine reports nothing."""
    speculative = [run for run in runs if np.isfinite(run.measured["accept_length"]).any()]
    if not speculative:
        return []
    fig = new_figure(5 * len(speculative), 3.8)
    axes = np.atleast_1d(fig.subplots(1, len(speculative)))
    for i, (ax, run) in enumerate(zip(axes, speculative)):
        ax.set(title=f"{run.caption}\n({run.histogram.source})", xlabel="draft position", ylim=(-0.05, 1.05),
               ylabel="acceptance given the earlier ones")
        ax.title.set_fontsize(8)
        if not _position_line(ax, run.histogram.counts, "all", _color(i)):
            _note(ax, NOT_EXPORTED)
            continue
        if has_categories(run) and run.histogram.source.startswith("per request"):
            names = categories(run.measured)
            for j, name in enumerate(dict.fromkeys(names.dropna())):
                _position_line(ax, requests_histogram(run.measured[names == name]), name, _color(i + j + 1), ":")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    _footnote(fig, speculative)
    return save(fig, out_dir, "acceptance_by_position")


def plot_accept_length_along_output(runs: Sequence[Run], out_dir) -> list:
    """Tokens per verify step by output-position bin, one line per speculative run (does acceptance
    decay over a long answer?); "not measured" where no request streamed a chunk per step."""
    speculative = [run for run in runs if np.isfinite(run.measured["accept_length"]).any()]
    if not speculative:
        return []
    fig = new_figure(8, 3.8)
    ax = fig.add_subplot()
    drawn = []
    for i, run in enumerate(speculative):
        bins = accept_length_by_position(run.measured)
        if bins.empty:
            continue
        middle = (bins["bin_start"] + bins["bin_end"]) / 2
        ax.plot(middle, bins["accept_length"], marker="o", color=_color(i), label=run.caption)
        drawn.append(run)
    ax.set(xlabel="output position (tokens)", ylabel="tokens per verify step",
           title="Accept length along the output")
    if drawn:
        ax.legend(fontsize=7)
    else:
        _note(ax, NOT_MEASURED_ALONG)
    _footnote(fig, speculative)
    return save(fig, out_dir, "accept_length_along_output")
