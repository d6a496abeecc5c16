"""The nightly regression job: run the configured workloads, gate them against a pinned baseline.

A metric regresses only when its change is worse than its threshold AND its 95% interval
excludes zero on the bad side: fixed thresholds on noisy numbers cry wolf, and averages hide
tails, so P95 latency is gated too. GSM8K accuracy regresses on McNemar's exact test. Exit codes:
0 pass (or baseline pinned), 1 regression, 2 could not run.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from harness.errors import SparkbenchError
from harness.metrics.catalogue import ACCURACY as ACCURACY_KIND
from harness.metrics.catalogue import gated
from harness.nightly.config import NightlyConfig

# From the metric catalogue: (metric, stat, +1 when higher is better / -1 when lower is better) of
# the metrics gated on their interval, and the accuracy gated on McNemar's test.
GATED = [(m.name, m.gate_stat, m.direction) for m in gated() if m.kind != ACCURACY_KIND]
ACCURACY = next((m.name, m.gate_stat) for m in gated() if m.kind == ACCURACY_KIND)
VERDICT_COLUMNS = ["workload", "metric", "stat", "baseline_value", "value", "change", "ci95_low", "ci95_high",
                   "threshold", "p_value", "verdict"]


def pinned_baseline(config: NightlyConfig) -> dict[str, str]:
    """workload name -> run directory of the pinned baseline ({} when none is pinned yet)."""
    if not config.baseline_file.exists():
        return {}
    try:
        return json.loads(config.baseline_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"{config.baseline_file} is corrupt: {exc}") from exc


def pin_baseline(config: NightlyConfig, runs: dict[str, Path]) -> None:
    config.baseline_file.parent.mkdir(parents=True, exist_ok=True)
    config.baseline_file.write_text(json.dumps({k: str(v) for k, v in runs.items()}, indent=2), encoding="utf-8")


def _regressed(direction: int, change: float, low: float, high: float, threshold: float) -> bool:
    """Worse than the threshold AND the interval excludes zero on the bad side."""
    if direction > 0:
        return change < -threshold and high < 0
    return change > threshold and low > 0


def gate_metric(row: pd.Series, direction: int, threshold: float) -> str:
    if pd.isna(row["baseline_value"]):
        return "not measured"
    if pd.isna(row["value"]):
        return "regressed (missing in candidate)"  # e.g. speculation switched off
    if pd.isna(row["change"]) or pd.isna(row["ci95_low"]):
        return "no interval"
    return "regressed" if _regressed(direction, row["change"], row["ci95_low"], row["ci95_high"], threshold) else "pass"


def gate_accuracy(row: pd.Series, alpha: float) -> str:
    """Accuracy regresses when it fell and McNemar's exact test rejects 'no change' at `alpha`."""
    return "regressed" if row["change"] < 0 and row["p_value"] < alpha else "pass"


def verdicts(comparison: pd.DataFrame, config: NightlyConfig) -> pd.DataFrame:
    """One verdict row per gated metric of the candidate rows of a comparison table."""
    candidate = comparison[comparison["run_id"] != comparison["baseline_run_id"]]
    rows = []
    for metric, stat, direction in GATED + [(*ACCURACY, 0)]:
        match = candidate[(candidate["metric"] == metric) & (candidate["stat"] == stat)]
        if match.empty:
            continue
        row = match.iloc[0]
        threshold = config.thresholds.get(metric, 0.0)
        verdict = gate_accuracy(row, config.alpha) if direction == 0 else gate_metric(row, direction, threshold)
        rows.append({**{c: row.get(c) for c in VERDICT_COLUMNS if c in row}, "threshold": threshold,
                     "verdict": verdict})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def append_history(config: NightlyConfig, night: str, comparison: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Add tonight's candidate values (and the baseline's, marked) to the history table."""
    verdict_of = {(r.metric, r.stat): r.verdict for r in table.itertuples()}
    rows = comparison.assign(night=night, role=lambda d: d["run_id"].eq(d["baseline_run_id"]).map(
        {True: "baseline", False: "candidate"}))
    rows = rows[["night", "role", "run_id", "workload", "metric", "stat", "value", "unit"]].copy()
    rows["verdict"] = [verdict_of.get((m, s), "") if role == "candidate" else ""
                       for m, s, role in zip(rows["metric"], rows["stat"], rows["role"])]
    old = pd.read_csv(config.history_file) if config.history_file.exists() else None
    history = rows if old is None else pd.concat([old, rows], ignore_index=True)
    config.history_file.parent.mkdir(parents=True, exist_ok=True)
    history.to_csv(config.history_file, index=False)
    return history


def night_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
