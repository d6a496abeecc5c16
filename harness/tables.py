"""Tables for people: the run summary printed at the end of a run and by `sparkbench summarize`.

The long summary table (`run_id, workload, metric, stat, value, unit`) is written beside the
records as `summary.csv`; the printed view picks the headline rows out of it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.metrics.summary import summarize
from harness.records import load_requests
from harness.rundir import load_manifest

SUMMARY_NAME = "summary.csv"
HEADLINE = [
    ("ttft_ms", ["mean", "p50", "p95"]),
    ("tpot_ms", ["mean", "p50", "p95"]),
    ("e2e_ms", ["mean", "p50", "p95"]),
    ("decode_throughput_aggregate", ["value"]),
    ("decode_throughput_mean_of_requests", ["value"]),
    ("completion_tokens", ["mean"]),
]


def run_summary(run_dir: Path) -> pd.DataFrame:
    """The long summary of one run, computed from its stored per-request records."""
    manifest = load_manifest(run_dir)
    return summarize(load_requests(run_dir), manifest["run_id"], manifest["workload"]["name"])


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """Metric rows with the chosen stats as columns, in HEADLINE order (a view for reading)."""
    rows = []
    for metric, stats in HEADLINE:
        part = summary[(summary["metric"] == metric) & summary["stat"].isin(stats)]
        if part.empty:
            continue
        row = {"metric": metric, "unit": part["unit"].iloc[0]}
        row.update({s: v for s, v in zip(part["stat"], part["value"])})
        rows.append(row)
    return pd.DataFrame(rows).set_index("metric")


def print_run_summary(run_dir: Path, full: bool = False) -> None:
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    summary = run_summary(run_dir)
    summary.to_csv(run_dir / SUMMARY_NAME, index=False)
    print(f"\nrun {manifest['run_id']}  status={manifest['status']}  "
          f"requests={manifest.get('requests_recorded')}  workload={manifest['workload']['name']}")
    print(f"scale: {manifest.get('scale')}")
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.3f}".format):
        print(summary.to_string(index=False) if full else headline(summary).to_string())
    print(f"records: {run_dir}")
