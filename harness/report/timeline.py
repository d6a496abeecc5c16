"""One run's timeline: what the client, the server and the GPUs did, second by second.

Six panels on one time axis (seconds from the start of the warm-up, on the client's clock):
requests in flight (client) beside running and queued (server); KV-cache use; output tokens/s
(client, from the chunks' arrival times, and the server's own figure); GPU utilisation; SM and
memory clocks; GPU power. The warm-up is shaded and the measured window marked. A panel with
nothing to draw says why ("not exported by the server", "not measured: ...").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.analysis.run import Run
from harness.engines.series import GEN_THROUGHPUT, GENERATION_TOKENS, KV_USAGE, QUEUED, RUNNING
from harness.metrics.timeline import NS_PER_S, counter_rate, in_flight, output_rate, role_series
from harness.records.entries import SamplerEntry, TelemetryEntry, TelemetryWindow
from harness.report.plots import new_figure, save
from harness.telemetry.sampling import DEFAULT_INTERVAL_S

PANELS = ("requests", "KV cache use %", "output tok/s", "GPU utilisation %", "clocks MHz", "GPU power W")


class _Axis:
    """Times as seconds from the timeline's origin."""

    def __init__(self, run: Run) -> None:
        telemetry = run.record.telemetry or TelemetryEntry()
        self.window = telemetry.window or TelemetryWindow()
        self.interval_s = float(telemetry.interval_s or DEFAULT_INTERVAL_S)
        starts = [int(v) for v in run.requests["sent_ns"].dropna()] or [0]
        self.origin = min(starts) if self.window.warmup_start_ns is None else self.window.warmup_start_ns

    def s(self, t_ns) -> np.ndarray:
        return (np.asarray(t_ns, dtype=np.int64) - self.origin) / NS_PER_S


def _absent(ax, why: str) -> None:
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#555555")


def _requests(ax, run: Run, axis: _Axis, server_why: str) -> None:
    requests = run.requests.dropna(subset=["sent_ns"])
    events = np.unique(np.concatenate([requests["sent_ns"].astype("int64"), requests["end_ns"].astype("int64")]))
    if events.size:
        counts = in_flight(requests["sent_ns"].astype("int64"), requests["end_ns"].astype("int64"), events)
        ax.step(axis.s(events), counts, where="post", color="#1f77b4", label="client in flight")
    for role, color in ((RUNNING, "#2ca02c"), (QUEUED, "#d62728")):
        rows = role_series(run.server_metrics, role)
        if not rows.empty:
            ax.plot(axis.s(rows["t_ns"]), rows["value"], "o-", ms=3, color=color, label=f"server {role}")
    if role_series(run.server_metrics, RUNNING).empty:
        ax.text(0.99, 0.9, f"server: {server_why}", transform=ax.transAxes, ha="right", fontsize=8, color="#555555")
    ax.legend(fontsize=7, loc="upper left")


def _server_line(ax, run: Run, axis: _Axis, role: str, scale: float, why: str, label: str) -> None:
    rows = role_series(run.server_metrics, role)
    if rows.empty:
        _absent(ax, why)
        return
    ax.plot(axis.s(rows["t_ns"]), rows["value"] * scale, "o-", ms=3, color="#9467bd", label=label)


def _throughput(ax, run: Run, axis: _Axis, server_why: str) -> None:
    requests = run.requests
    stamps = [int(ns) for chunks in requests["chunk_ns"] for ns in chunks]
    if stamps:
        step = int(axis.interval_s * NS_PER_S)
        edges = np.arange(min(stamps), max(stamps) + step + 1, step, dtype=np.int64)
        rate = output_rate(list(requests["chunk_ns"]), list(requests["chunk_tokens"]), edges)
        ax.step(axis.s(edges[:-1]), rate, where="post", color="#1f77b4", label="client (chunk arrivals)")
    gauge, counter = role_series(run.server_metrics, GEN_THROUGHPUT), role_series(run.server_metrics, GENERATION_TOKENS)
    if not gauge.empty:
        ax.plot(axis.s(gauge["t_ns"]), gauge["value"], "o-", ms=3, color="#ff7f0e", label="server gauge")
    elif len(counter) > 1:
        mid, rate = counter_rate(counter["t_ns"].to_numpy(), counter["value"].to_numpy())
        ax.plot(axis.s(mid), rate, "o-", ms=3, color="#ff7f0e", label="server (token counter rate)")
    else:
        ax.text(0.99, 0.9, f"server: {server_why}", transform=ax.transAxes, ha="right", fontsize=8, color="#555555")
    ax.legend(fontsize=7, loc="upper left")


def _device(ax, run: Run, axis: _Axis, metrics: tuple[str, ...], why: str) -> None:
    samples = run.device_samples
    drawn = False
    for (gpu, metric), rows in samples[samples["metric"].isin(metrics)].groupby(["gpu", "metric"]):
        ax.plot(axis.s(rows["t_ns"]), rows["value"], "-", label=f"GPU {gpu} {metric}")
        drawn = True
    if drawn:
        ax.legend(fontsize=7, loc="upper left")
    else:
        _absent(ax, why)


def _mark_window(axes, axis: _Axis) -> None:
    start, end = axis.window.measured_start_ns, axis.window.measured_end_ns
    for ax in axes:
        if start is not None:
            ax.axvspan(0, axis.s(start), color="#dddddd", alpha=0.6, lw=0)
            ax.axvline(axis.s(start), color="black", lw=0.8, ls="--")
        if end is not None:
            ax.axvline(axis.s(end), color="black", lw=0.8, ls="--")
    if start is not None:
        axes[0].text(axis.s(start), 1.02, " measured", transform=axes[0].get_xaxis_transform(), fontsize=8)
        axes[0].text(0, 1.02, "warm-up", transform=axes[0].get_xaxis_transform(), fontsize=8, color="#555555")


def _why(entry: SamplerEntry | None, absent: str) -> str:
    if entry is None:
        return "not recorded (run made without telemetry)"
    if entry.status == "measured":
        return absent
    return f"{entry.status}: {entry.reason or ''}".strip()


def plot_run_timeline(run: Run, out_dir: Path, name: str = "timeline") -> list[Path]:
    """The run's timeline figure (PNG and SVG) in `out_dir`."""
    telemetry = run.record.telemetry or TelemetryEntry()
    server_why = _why(telemetry.server_metrics, "not exported by the server")
    device_why = _why(telemetry.device, "not reported by NVML")
    axis = _Axis(run)
    fig = new_figure(11, 12)
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    _requests(axes[0], run, axis, server_why)
    _server_line(axes[1], run, axis, KV_USAGE, 100.0, server_why, "server KV cache use")
    _throughput(axes[2], run, axis, server_why)
    _device(axes[3], run, axis, ("gpu_util_pct",), device_why)
    axes[3].set_ylim(0, 105)  # a share: drawn on its whole range, so a busy GPU is seen as busy
    _device(axes[4], run, axis, ("sm_clock_mhz", "memory_clock_mhz"), device_why)
    _device(axes[5], run, axis, ("power_w",), device_why)
    for ax, title in zip(axes, PANELS):
        ax.set_ylabel(title, fontsize=8)
    _mark_window(axes, axis)
    axes[-1].set_xlabel("seconds from the start of the warm-up (client clock)")
    fig.suptitle(f"Timeline: {run.caption}", fontsize=10)
    return save(fig, out_dir, name)


def has_timeline(run: Run) -> bool:
    """Whether the run recorded anything over time to draw beside its requests."""
    telemetry = run.record.telemetry
    return bool(telemetry and telemetry.window and telemetry.window.as_recorded())
