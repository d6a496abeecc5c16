"""Figures of measured runs and of the published ladder, each written as PNG and SVG.

Every function takes loaded runs (`harness.analysis.run.Run`: manifest, derived per-request table,
summary) and an output folder, and returns the paths it wrote. Figures are matplotlib `Figure`
objects rendered by the Agg canvas, so nothing depends on pyplot's global state or the session's
backend. Runs are named by their captions (`Run.caption`: label, concurrency, REDUCED SCALE on the
test bed, status; `tell_apart` numbers runs that share a label), so a test-bed run is never mistaken for a
measurement of the published setup. Callers pass runs of one workload shape: figures set runs
side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.analysis.reference import QUOTED, ladder, ladder_provenance, load_reference, published_gains
from harness.analysis.run import Run
from harness.analysis.stats import bootstrap_ratio_of_sums
from harness.metrics.energy import DOMAINS
from harness.metrics.speculative import accept_length_parts
from harness.metrics.summary import decode_throughput_parts
from harness.records.rundir import SCALE_LABEL

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
NO_SPECULATION = "no speculative decoding in this run\n(the server reported no verify rounds)"


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _footnote(fig: Figure, runs: Sequence[Run]) -> None:
    """State the scale under the figure when any run is on the reduced test bed."""
    if any(r.reduced_scale for r in runs):
        fig.supxlabel(SCALE_LABEL, fontsize=8, color="#a00000")


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """Write `name`.png and `name`.svg into out_dir (SVG without a date, so reruns are identical)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png)
    fig.savefig(svg, metadata={"Date": None})
    return [png, svg]


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def energy_label(run: Run) -> str:
    """Energy beside throughput: J per output token of each measured domain, or "energy not measured"."""
    values = run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
    parts = [f"{values[f'{domain}_energy_per_output_token_j']:.3g} J/token ({domain})" for domain in DOMAINS
             if np.isfinite(values.get(f"{domain}_energy_per_output_token_j", np.nan))]
    return ", ".join(parts) or "energy not measured"


def plot_decode_throughput(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """Horizontal bars: each run's aggregate decode throughput, tok/s, with its 95% bootstrap
    interval (requests resampled, `bootstrap_ratio_of_sums`), the value printed on the bar with the
    run's energy per output token beside it."""
    fig = new_figure(10, 1.6 + 0.8 * len(runs))
    ax = fig.add_subplot()
    right = 0.0
    for i, run in enumerate(runs):
        point, low, high = bootstrap_ratio_of_sums(*decode_throughput_parts(run.measured))
        err = [[point - low], [high - point]] if np.isfinite(low) else None
        ax.barh(i, point, xerr=err, color=_color(i), capsize=6, height=0.6)
        end = np.nanmax([point, high, 0.0])
        right = max(right, end)
        # The numbers sit right of the interval, where a short bar cannot crowd them.
        text = (f"  {point:.2f} tok/s\n  95% CI {low:.2f} - {high:.2f}\n  {len(run.measured)} requests\n  {energy_label(run)}"
                if np.isfinite(point) else "  no request decoded: no throughput")
        ax.text(end, i, text, ha="left", va="center", fontsize=8)
    ax.set_xlim(0, right * 1.35 if right > 0 else 1)
    ax.set_yticks(range(len(runs)), [run.caption for run in runs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("decode throughput, tokens/s = sum(output tokens - 1) / sum(first token to [DONE] time)")
    ax.set_title("Decode throughput per run (aggregate over requests), 95% bootstrap interval")
    ax.grid(axis="x", alpha=0.3)
    _footnote(fig, runs)
    return save(fig, out_dir, "decode_throughput")


def _time_unit(samples: Sequence[np.ndarray]) -> tuple[str, float]:
    """Seconds when any latency reaches 10 s, else milliseconds; (unit, divisor of ms)."""
    longest = max((s.max() for s in samples if s.size), default=0.0)
    return ("s", 1000.0) if longest >= 10_000 else ("ms", 1.0)


def plot_latency_cdf(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """Empirical CDF of end-to-end latency per run, P50 and P95 marked (numpy linear percentiles,
    as in the run summary) and their values in the legend."""
    samples = [_finite(r.measured["e2e_ms"]) for r in runs]
    unit, divisor = _time_unit(samples)
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    for i, (name, x) in enumerate(zip([run.caption for run in runs], samples)):
        if x.size == 0:
            continue
        x = np.sort(x) / divisor
        # The curve starts at 0 at the fastest request and reaches k/n at the k-th fastest.
        ax.step(np.r_[x[0], x], np.arange(x.size + 1) / x.size, where="post", color=_color(i), lw=1.8)
        p50, p95 = np.percentile(x, [50, 95])
        ax.plot([p50, p95], [0.50, 0.95], "o", color=_color(i), ms=8, mec="black",
                label=f"{name}\n  P50 {p50:.4g} {unit}, P95 {p95:.4g} {unit}, n={x.size}")
    for level in (0.50, 0.95):
        ax.axhline(level, color="grey", ls=":", lw=1)
        ax.text(ax.get_xlim()[0], level, f" P{int(level * 100)}", va="bottom", fontsize=8, color="grey")
    ax.set_xlabel(f"end-to-end latency per request, {unit} (request sent to [DONE])")
    ax.set_ylabel("fraction of requests at or below")
    ax.set_ylim(0, 1.02)
    ax.set_title("End-to-end latency distribution (empirical CDF); dots mark P50 and P95\n"
                 "(percentiles interpolated between requests, as in the run summary)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    _footnote(fig, runs)
    return save(fig, out_dir, "latency_cdf")


def plot_tpot_vs_length(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """One point per request: TPOT (ms per output token after the first) against output length."""
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    for i, (run, name) in enumerate(zip(runs, [run.caption for run in runs])):
        tokens = run.measured["completion_tokens"].to_numpy(dtype=float)
        tpot = run.measured["tpot_ms"].to_numpy(dtype=float)
        keep = np.isfinite(tokens) & np.isfinite(tpot)
        mean = tpot[keep].mean() if keep.any() else float("nan")
        ax.scatter(tokens[keep], tpot[keep], s=36, alpha=0.7, color=_color(i), marker="os^Dv<>p"[i % 8],
                   edgecolor="black", lw=0.4, label=f"{name}: mean {mean:.3g} ms, n={keep.sum()}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("output length, tokens (completion_tokens reported by the server)")
    ax.set_ylabel("TPOT, ms per token = (e2e - TTFT) / (tokens - 1)")
    ax.set_title("Time per output token against output length, one point per request")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _footnote(fig, runs)
    return save(fig, out_dir, "tpot_vs_output_length")


def _histogram_panels(runs: Sequence[Run], title: str) -> tuple[Figure, list]:
    fig = new_figure(10, 1.2 + 2.2 * len(runs))
    # A shared axis lets the eye compare runs: the same length sits at the same place in every panel.
    axes = fig.subplots(len(runs), 1, squeeze=False, sharex=True)[:, 0]
    fig.suptitle(title)
    return fig, list(axes)


def _histogram(ax, values: np.ndarray, color: str) -> None:
    """Histogram with integer-friendly bins: one bin per value when there are few distinct values."""
    distinct = np.unique(values)
    if distinct.size <= 30:
        step = np.min(np.diff(distinct)) if distinct.size > 1 else 1.0
        bins = np.append(distinct, distinct[-1] + step) - step / 2
    else:
        bins = 30
    ax.hist(values, bins=bins, color=color, edgecolor="black", lw=0.5)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def plot_accept_length(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """Per-request accept length (tokens per verify round), one panel per run; the token-weighted
    run value (total tokens / total rounds) as a line; a note where the run did not speculate."""
    fig, axes = _histogram_panels(runs, "Speculative decoding: accept length per request "
                                        "(tokens per verify round, bonus token included)")
    for i, (ax, run, name) in enumerate(zip(axes, runs, [run.caption for run in runs])):
        lengths = _finite(run.measured["accept_length"])
        ax.set_title(name, fontsize=9)
        if lengths.size == 0:
            ax.text(0.5, 0.5, NO_SPECULATION, transform=ax.transAxes, ha="center", va="center", fontsize=11)
            ax.set_yticks([])
            continue
        _histogram(ax, lengths, _color(i))
        num, den = accept_length_parts(run.measured)
        weighted = num.sum() / den.sum()
        ax.axvline(weighted, color="black", ls="--", label=f"token-weighted {weighted:.3g} tokens/round")
        ax.set_ylabel("requests")
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("accept length, tokens per verify round")
    _footnote(fig, runs)
    return save(fig, out_dir, "accept_length")


def plot_output_length(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """Distribution of output length per run (completion_tokens), mean and median marked."""
    fig, axes = _histogram_panels(runs, "Output length per request (completion_tokens), one panel per run")
    for i, (ax, run, name) in enumerate(zip(axes, runs, [run.caption for run in runs])):
        tokens = _finite(run.measured["completion_tokens"])
        ax.set_title(name, fontsize=9)
        if tokens.size == 0:
            ax.text(0.5, 0.5, "no completed requests", transform=ax.transAxes, ha="center", va="center")
            continue
        _histogram(ax, tokens, _color(i))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.axvline(tokens.mean(), color="black", ls="--", label=f"mean {tokens.mean():.4g} tokens")
        ax.axvline(np.median(tokens), color="black", ls=":", label=f"median {np.median(tokens):.4g} tokens")
        ax.set_ylabel("requests")
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("output length, tokens")
    _footnote(fig, runs)
    return save(fig, out_dir, "output_length")


def plot_published_ladder(out_dir: Path) -> list[Path]:
    """The published ablation ladder: synthetic decode throughput of each configuration step, the
    step gains (recomputed from the stored figures) between the bars."""
    reference = load_reference()
    steps = ladder(reference)
    values = [v for _, _, v in steps]
    notes = {run_id: note for run_id, note in ladder_provenance(reference).items() if note != QUOTED}
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    bars = ax.bar(range(len(steps)), values, color=["#7f7f7f", "#1f77b4", "#2ca02c", "#d62728"], width=0.6)
    for i, (run_id, _, value) in enumerate(steps):
        marked = run_id in notes
        bars[i].set_hatch("//" if marked else "")
        ax.text(i, value + 1.5, f"{value:.2f} tok/s" + (" *" if marked else ""), ha="center", fontsize=10,
                fontweight="bold")
    for i in range(1, len(values)):
        gain = (values[i] / values[i - 1] - 1) * 100
        ax.text(i, values[i] - 3, f"+{gain:.1f}%\nover the\nstep before", ha="center", va="top",
                fontsize=9, color="white", fontweight="bold")
    ax.set_xticks(range(len(steps)), [label for _, label, _ in steps])
    ax.set_ylabel("decode throughput, tokens/s")
    ax.set_ylim(0, max(values) * 1.25)
    total = published_gains(reference)["synthetic_all_three"]
    ax.set_title("Published ablation ladder, Ling-3.0-flash on one DGX Spark: synthetic 32K in / 2K out, "
                 f"greedy, batch 1\n(all three vs baseline: +{total:.1f}%)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    derived = "\n".join(f"* {note}" for note in notes.values())
    fig.supxlabel("Published figures (NVIDIA Technical Blog, results/reference/), not measured by this harness; "
                  f"hatched bars (*) are not stated as such:\n{derived}", fontsize=7)
    return save(fig, out_dir, "published_ladder")


RUN_FIGURES = (plot_decode_throughput, plot_latency_cdf, plot_tpot_vs_length, plot_accept_length, plot_output_length)


def plot_runs(runs: Sequence[Run], out_dir: Path) -> list[Path]:
    """Every figure of runs of one shape; the paths written (PNG and SVG)."""
    return [path for plot in RUN_FIGURES for path in plot(runs, Path(out_dir))]

