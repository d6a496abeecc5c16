"""Tables for people: the run summary shown at the end of a run and by `sparkbench summarize`.

The long summary table (`run_id, workload, metric, stat, value, unit`) is the Run's
(`harness.analysis.run`); the views here pick the headline rows out of it and say how energy was
measured and whether any stream hid its decode.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.run import Run
from harness.metrics.catalogue import headline_stats
from harness.metrics.integrity import FLAGS, integrity_warning

HEADLINE = headline_stats()  # (metric, stats) shown by the headline view, from the catalogue


def power_note(manifest: dict) -> str:
    """How energy was measured (sensors, method, interval), or why it was not."""
    power = manifest.get("power") or {}
    if power.get("status") != "measured":
        reasons = power.get("not_available") or [power.get("reason") or "the run recorded no power entry"]
        return "not measured (" + "; ".join(reasons) + ")"
    sensors = ", ".join(f"{s['sensor']} {s['device']}" for s in power["sensors"])
    methods = "; ".join(dict.fromkeys(s["method"] for s in power["sensors"]))
    return f"{sensors}: {methods}; every {power['interval_ms']:g} ms, {power.get('samples', 0)} samples"


def stream_warning(summary: pd.DataFrame) -> str | None:
    """The stream integrity warning of a run summary (how many requests were flagged, and why)."""
    values = summary[summary["stat"] == "value"].set_index("metric")["value"]
    counts = {name: values.get(name, 0.0) for name in ("requests_flagged", *(f"requests_{f}" for f in FLAGS))}
    return integrity_warning(counts, values.get("requests", 0.0))


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """Metric rows with the chosen stats as columns, in HEADLINE order (a view for reading)."""
    rows = []
    for metric, stats in HEADLINE:
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
    manifest, summary = run.manifest, run.summary
    lines = [f"\nrun {run.run_id}  status={manifest['status']}  requests={manifest.get('requests_recorded')}  "
             f"workload={run.workload}"]
    lines += [warning for warning in [stream_warning(summary)] if warning]
    lines += [f"scale: {manifest.get('scale')}", f"energy: {power_note(manifest)}"]
    roofline, why = run.roofline
    lines += [f"roofline (config: {why})", *roofline.lines()] if roofline else [f"roofline: not computed ({why})"]
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.3f}".format):
        lines.append(summary.to_string(index=False) if full else headline(summary).to_string(na_rep=""))
    return "\n".join([*lines, f"records: {run.path}"])
