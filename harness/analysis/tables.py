"""Tables for people: the run summary shown at the end of a run and by `sparkbench summarize`,
and the key figures a report opens with.

The long summary table (`run_id, workload, metric, stat, value, unit`) is the Run's
(`harness.analysis.run`); the views here pick the headline rows out of it, say how energy was
measured, whether any stream hid its decode and what else a reader must be warned of, and set the
key figures of comparable runs side by side with their changes against the baseline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pandas as pd

from harness.analysis.fidelity import SUMMARY_FILE as FIDELITY_SUMMARY
from harness.analysis.repeats import repetition_table
from harness.analysis.run import Run
from harness.analysis.telemetry import telemetry_warnings
from harness.facts import NOT_EXPORTED
from harness.metrics.catalogue import headline_stats
from harness.metrics.integrity import FLAGS, integrity_warning
from harness.metrics.load import lag_warning
from harness.records.entries import PowerEntry, ServerCounters, TelemetryEntry
from workloads.registry import headline_metrics

HEADLINE = headline_stats()  # (metric, stats) shown by the headline view, from the catalogue


def power_note(power: PowerEntry | None) -> str:
    """How energy was measured (sensors, method, interval), or why it was not."""
    power = power or PowerEntry()
    if power.status != "measured":
        reasons = power.not_available or [power.reason or "the run recorded no power entry"]
        return "not measured (" + "; ".join(reasons) + ")"
    sensors = ", ".join(f"{s.sensor} {s.device}" for s in power.sensors)
    methods = "; ".join(dict.fromkeys(s.method for s in power.sensors))
    return f"{sensors}: {methods}; every {power.interval_ms:g} ms, {power.samples or 0} samples"


def gpu_note(telemetry: TelemetryEntry | None) -> str:
    """Whether the GPUs' state was sampled (how many GPUs), or why not: said in the run's summary,
    once per run, never as a line of its own on every run of a machine without a GPU."""
    device = telemetry.device if telemetry is not None else None
    if device is None:
        return "not recorded (a run from before telemetry)"
    if device.status == "measured":
        return f"measured ({len(device.gpus or [])} GPUs, {device.samples or 0} samples)"
    return f"{device.status} ({device.reason})" if device.reason else device.status


def counter_note(counters: ServerCounters) -> str:
    """The server's speculative counters over the measured requests (and their accept length), or
    NOT_EXPORTED when the engine keeps none: a missing counter is never shown as zero."""
    delta, length = counters.delta, counters.accept_length
    if not delta:
        return NOT_EXPORTED
    text = ", ".join(f"{name.replace('_', ' ')} {value:g}" for name, value in delta.items())
    return text + ("" if length is None else f"; accept length {length:.3f}")


def stream_warning(summary: pd.DataFrame) -> str | None:
    """The stream integrity warning of a run summary (how many requests were flagged, and why)."""
    values = summary[summary["stat"] == "value"].set_index("metric")["value"]
    counts = {name: values.get(name, 0.0) for name in ("requests_flagged", *(f"requests_{f}" for f in FLAGS))}
    return integrity_warning(counts, values.get("requests", 0.0))


def headline(summary: pd.DataFrame, own: tuple[str, ...] = ()) -> pd.DataFrame:
    """Metric rows with the chosen stats as columns, in HEADLINE order (a view for reading), then the
    `value` of each metric in `own` (the workload's own figures, `workloads.registry.headline_metrics`)."""
    rows = []
    shown = {metric for metric, _ in HEADLINE}
    for metric, stats in [*HEADLINE, *((name, ("value",)) for name in own if name not in shown)]:
        part = summary[(summary["metric"] == metric) & summary["stat"].isin(stats)].dropna(subset=["value"])
        if part.empty:
            continue
        row = {"metric": metric, "unit": part["unit"].iloc[0]}
        row.update({s: v for s, v in zip(part["stat"], part["value"])})
        rows.append(row)
    return pd.DataFrame(rows).set_index("metric")


def format_run_summary(run: Run, full: bool = False) -> str:
    """The run summary as text for a terminal: status, warnings, scale, energy, then the headline
    view (or with `full` every row of the long summary)."""
    record, summary = run.record, run.summary
    lines = [f"\nrun {run.run_id}  label={run.label!r}  concurrency={run.concurrency}  status={run.status}  "
             f"requests={record.requests_recorded}  workload={run.workload}"]
    lines += [load_line(run)] if record.options.open_loop else []
    lines += [warning for warning in [stream_warning(summary)] if warning]
    lines += [f"WARNING: {warning}" for warning in telemetry_warnings(run)]
    lines += [f"scale: {record.scale}", f"energy: {power_note(record.power)}", f"GPU state: {gpu_note(record.telemetry)}",
              f"server: {run.facts.shown('engine')} {run.facts.shown('version')}, model {run.facts.shown('model')}",
              f"speculative counters (server): {counter_note(record.server_counters)}"]
    roofline, why = run.roofline
    lines += [f"roofline (config: {why})", *roofline.lines()] if roofline else [f"roofline: not computed ({why})"]
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.3f}".format):
        lines.append(summary.to_string(index=False) if full else headline(summary, headline_metrics(run.workload)).to_string(na_rep=""))
    return "\n".join([*lines, f"records: {run.path}"])


def load_line(run: Run) -> str:
    """An open loop's rates side by side: asked (with the seed of the draw), offered by the schedule
    drawn or replayed, sent, and completed by the server (req/s, `harness.metrics.load`)."""
    options, values = run.record.options, run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
    asked = (f"asked {options.request_rate:g}/s (arrival seed {options.arrival_seed})"
             if options.request_rate is not None else f"replayed {options.schedule}")
    shown = {name: f"{values.get(metric, float('nan')):.4g}/s" for name, metric in
             (("offered", "offered_rate_rps"), ("sent", "achieved_rate_rps"), ("completed", "completed_rate_rps"))}
    return "open loop: rate " + asked + "".join(f", {name} {value}" for name, value in shown.items())


def format_repetitions(runs: Sequence[Run]) -> str:
    """The spread across repeated runs as text: per compared figure the mean, sd, the 95% interval
    of the mean, and its half-width beside each repetition's own bootstrap half-width (fractions)."""
    table = repetition_table(runs)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        return (f"\nacross {len(runs)} repetitions ({runs[0].label}; 95% interval of the mean, Student t; "
                f"half-widths as fractions of the figure, across repetitions and within each run):\n"
                + table.to_string(index=False))


# --- the headline: key figures of comparable runs ----------------------------------------------

def figure_text(value: float) -> str:
    """4 significant digits, and whole numbers with thousands separators from 1,000 on."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


# (metric, stat, column, number format) of the figures the report opens with, in order.
KEY_FIGURES = (("decode_throughput_aggregate", "value", "decode tok/s", figure_text),
               ("tpot_ms", "mean", "TPOT mean ms", figure_text), ("ttft_ms", "mean", "TTFT mean ms", figure_text),
               ("e2e_ms", "mean", "E2E mean ms", figure_text),
               ("accept_length_token_weighted", "value", "accept length", "{:.3g}".format))
ACCURACY_FORMAT = "{:.1%}".format
# Added when any run of the group ran an open loop, and the SLO figures when any had targets.
OPEN_LOOP_FIGURES = (("response_e2e_ms", "p95", "response E2E p95 ms", figure_text),)
# Added when any run's records show a reasoning model's thinking: TTFT beside the first answer token.
REASONING_FIGURES = (("ttfat_ms", "mean", "TTFAT mean ms", figure_text),)
SLO_FIGURES = (("slo_attainment", "mean", "SLO attainment", ACCURACY_FORMAT),
               ("goodput_rps", "value", "goodput req/s", figure_text))


def change_text(row: pd.Series) -> str:
    """`+12.3% [+10.1, +14.0]` (accuracy in percentage points), empty without a change."""
    if pd.isna(row["change"]):
        return ""
    unit = "%" if row["change_kind"] == "relative" else " pp"
    interval = "" if pd.isna(row["ci95_low"]) else f" [{row['ci95_low'] * 100:+.1f}, {row['ci95_high'] * 100:+.1f}]"
    return f"{row['change'] * 100:+.1f}{unit}{interval}"


def key_figure_cell(rows: pd.DataFrame, metric: str, stat: str, number: Callable[[float], str]) -> dict[str, str]:
    """One figure of one run from its comparison rows: value, change with interval, verdict."""
    match = rows[(rows["metric"] == metric) & (rows["stat"] == stat)]
    if match.empty or pd.isna(match["value"].iloc[0]):
        return {"value": "n/a", "change": "", "verdict": ""}
    row = match.iloc[0]
    return {"value": number(row["value"]), "change": change_text(row), "verdict": row["verdict"] or ""}


def thinks(derived: pd.DataFrame) -> bool:
    """Whether a run's requests show thinking: streamed apart, or a first answer token after the first token."""
    streamed = "reasoning_text" in derived.columns and bool((derived["reasoning_text"].fillna("") != "").any())
    later = (derived["ttfat_ms"] > derived["ttft_ms"]).any() if "ttfat_ms" in derived.columns else False
    return streamed or bool(later)


def key_figures(runs: Sequence[Run], comparison: pd.DataFrame) -> pd.DataFrame:
    """One row per run of one shape group: label, concurrency, scale, status, requests, then each
    KEY_FIGURES figure (and the scorer's accuracy) as a cell {value, change, verdict} against the
    group's baseline (compare_loaded)."""
    figures = list(KEY_FIGURES)
    if any(run.derived["scheduled_ns"].notna().any() for run in runs if "scheduled_ns" in run.derived.columns):
        figures += OPEN_LOOP_FIGURES
    if any(thinks(run.derived) for run in runs):
        figures += REASONING_FIGURES
    if any(run.slo_targets for run in runs):
        figures += SLO_FIGURES
    if runs[0].scorer is not None:
        figures.append((runs[0].scorer.accuracy_metric, "mean", "accuracy", ACCURACY_FORMAT))
    table = []
    for run in runs:
        values = run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
        rows = comparison[comparison["run_id"] == run.run_id]
        table.append({"run": run.name, "concurrency": "n/a" if run.concurrency is None else run.concurrency,
                      "scale": "REDUCED SCALE" if run.reduced_scale else run.record.scale or "not recorded",
                      "status": run.status,
                      "requests ok": f"{values.get('requests_ok', 0):.0f} of {values.get('requests', 0):.0f}",
                      **{column: key_figure_cell(rows, m, s, f) for m, s, column, f in figures}})
    return pd.DataFrame(table)


STALE_REASON = "the process that ran it ended without finishing it (killed, or out of disk); --resume continues it"


def run_warnings(run: Run) -> list[str]:
    """What a reader must know before trusting the run's figures: how it ended, failed requests,
    streams that hid the decode, prompts served from the prefix cache, a skipped guard, and what the
    server's metrics and the GPUs' state showed (`harness.analysis.telemetry`)."""
    record, values = run.record, run.summary[run.summary["stat"] == "value"].set_index("metric")["value"]
    reason = STALE_REASON if run.status == "stale" else record.error or "no reason recorded"
    warnings = [f"status {run.status}: {reason}"] if run.status != "complete" else []
    failed = int(values.get("requests_failed", 0) or 0)
    if failed:
        kinds = ", ".join(f"{m.removeprefix('errors_')} {v:.0f}" for m, v in values.items()
                          if m.startswith("errors_") and v > 0)
        warnings.append(f"{failed} of {values.get('requests', 0):.0f} requests failed ({kinds}); "
                        "every figure is of the ok requests")
    warnings += [w for w in [stream_warning(run.summary), lag_warning(run.judged)] if w]
    if record.prefix_cache_hits and record.workload.requires_uncached_prompts:
        warnings.append(f"the prefix cache served {record.prefix_cache_hits} requests: prefill not measured in full")
    if record.guard and record.guard.skipped:
        warnings.append(f"configuration guard skipped ({record.guard.skipped})")
    if record.allow_buffered:
        warnings.append("measured with --allow-buffered: the canary did not stream its tokens as made")
    return warnings + telemetry_warnings(run) + fidelity_lines(run)


def fidelity_lines(run: Run) -> list[str]:
    """The verdict of `sparkbench fidelity` on this (speculative) run, where it was checked."""
    path = run.path / FIDELITY_SUMMARY
    if not path.is_file():
        return []
    outcome = json.loads(path.read_text())
    return [f"speculation fidelity against {outcome['plain_run']}: {outcome['verdict']}"]
